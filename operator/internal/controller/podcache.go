package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/nodefit"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// maxCachedNamedPorts bounds the named container ports a cached pod keeps (a Service's named
// targetPort resolves against them): a pod may declare tens of thousands, each a few dozen bytes
// of the operator's heap. A Service whose targetPort names a port past a pod's first 64 named
// ports leaves that port out for that pod, as for a pod that does not declare it.
const maxCachedNamedPorts = 64

// maxCachedHash bounds the config-hash annotation a cached object keeps. The operator's hashes
// are 16 hex digits; a pod writes its own annotations, up to 256 KiB of them, and a longer value
// is kept cut short, which still differs from every hash (countPods counts it as another config).
const maxCachedHash = 64

// TrimPod is the transform of the manager's pod cache: it keeps what the controllers read from a
// pod and drops the rest. That is its name, namespace, UID, resource version, creation and
// deletion timestamps, the stack label alone among its labels, the config-hash annotation and the
// injection opt-out among its annotations (cut to maxCachedHash and to "false"), its phase, the
// node it runs on (the node check metrics), its IP and the status token of its dataplane
// container (the dataplane health events read /status there, with the token) and the name and
// readiness of the dataplane's status, an init container's or a program's regular one; for the EndpointSlice
// controller its Ready condition, for the unschedulable explainer its PodScheduled condition
// while that is False for Unschedulable, its containers' named ports and the addresses annotation (cut
// to podcontract.MaxAddressesBytes, which a value ParseAddresses accepts never reaches), all
// served.Addresses reads of it. Every pod with the stack
// label reaches the cache, in any namespace, and a pod writes its own labels and annotations
// (256 KiB of annotations each): kept whole, a tenant's thousand such pods would be a quarter
// GiB of the operator's heap and crash-loop it, and with failurePolicy Fail stop injection
// everywhere. Trimmed, a pod costs the same few hundred bytes whatever it carries. Anything that
// reads pods from the manager's cache sees only these fields.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: trimMeta(&p.ObjectMeta)}
	t.Labels = keep(p.Labels, fsv1.StackLabel, len(p.Labels[fsv1.StackLabel]))
	t.Annotations = keep(p.Annotations, podcontract.ConfigHashAnnotation, maxCachedHash)
	if v, ok := p.Annotations[podcontract.AddressesAnnotation]; ok {
		t.Annotations = withValue(t.Annotations, podcontract.AddressesAnnotation, v[:min(len(v), podcontract.MaxAddressesBytes)])
	}
	// The claim controller makes no claim for a pod that opted out of injection.
	if v, ok := p.Annotations[fsv1.InjectAnnotation]; ok {
		t.Annotations = withValue(t.Annotations, fsv1.InjectAnnotation, v[:min(len(v), len("false"))])
	}
	t.Spec.NodeName = p.Spec.NodeName
	t.Status.Phase = p.Status.Phase
	t.Status.PodIP = p.Status.PodIP
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == podcontract.DataplaneContainer {
			t.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: s.Name, Ready: s.Ready}}
		}
	}
	// The EndpointSlice controller reads the pod's Ready condition and the app containers' named
	// ports (a Service's named targetPort).
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			t.Status.Conditions = append(t.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
		// The unschedulable explainer starts on this condition alone; the scheduler's message
		// (rewritten on every attempt) is left out, so its retries change nothing cached.
		if nodefit.Unschedulable(c) {
			t.Status.Conditions = append(t.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
	}
	t.Spec.Containers = namedPorts(p.Spec.Containers)
	keepStatusToken(p, t)
	// A program's dataplane (spec.program) is a regular container: its readiness only.
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == podcontract.DataplaneContainer {
			t.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: s.Name, Ready: s.Ready}}
		}
	}
	return t, nil
}

// keepStatusToken keeps the pod's status token, which the health events send to its /status,
// on t's dataplane container, an init container or a program's regular one as in p: only a
// value podcontract accepts (at most podcontract.MaxStatusTokenLen bytes), else none.
func keepStatusToken(p, t *corev1.Pod) {
	token := inject.StatusToken(p)
	if token == "" {
		return
	}
	env := []corev1.EnvVar{{Name: podcontract.EnvStatusToken, Value: token}}
	isDataplane := func(c corev1.Container) bool { return c.Name == podcontract.DataplaneContainer }
	if slices.ContainsFunc(p.Spec.InitContainers, isDataplane) {
		t.Spec.InitContainers = []corev1.Container{{Name: podcontract.DataplaneContainer, Env: env}}
		return
	}
	if i := slices.IndexFunc(t.Spec.Containers, isDataplane); i >= 0 {
		t.Spec.Containers[i].Env = env
		return
	}
	t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: podcontract.DataplaneContainer, Env: env})
}

// TrimConfigMap is the transform of the manager's ConfigMap cache (metadata only: the
// controller compares the hash annotation, never the data). Any namespace's ConfigMap that
// carries the operator's managed-by label reaches it, and anyone who may write a ConfigMap may
// set that label: only one named <stack>-fstack with a StackInstance of that name as its
// controller, as the operator writes them, keeps its labels, hash annotation and controller
// reference, and every other is kept as a bare name, which the controller takes for what it
// is, a ConfigMap that is not a StackInstance's (a *ConflictError for a name it wants). Either
// costs the same few hundred bytes whatever the object carries.
func TrimConfigMap(obj any) (any, error) {
	var meta *metav1.ObjectMeta
	var tm metav1.TypeMeta
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		meta, tm = &o.ObjectMeta, o.TypeMeta
	case *corev1.ConfigMap:
		meta, tm = &o.ObjectMeta, o.TypeMeta
	default:
		return obj, nil
	}
	t := &metav1.PartialObjectMetadata{TypeMeta: tm, ObjectMeta: trimMeta(meta)}
	stack := meta.Labels[fsv1.StackLabel]
	owner := metav1.GetControllerOfNoCopy(meta)
	if stack == "" || meta.Name != ConfigMapName(stack) || owner == nil || owner.Kind != "StackInstance" ||
		owner.Name != stack || owner.APIVersion != fsv1.GroupVersion.String() {
		if _, typed := obj.(*corev1.ConfigMap); typed {
			return &corev1.ConfigMap{TypeMeta: tm, ObjectMeta: t.ObjectMeta}, nil
		}
		return t, nil
	}
	t.Labels = map[string]string{ManagedByLabel: ManagedBy, fsv1.StackLabel: stack}
	t.Annotations = keep(meta.Annotations, podcontract.ConfigHashAnnotation, maxCachedHash)
	t.OwnerReferences = []metav1.OwnerReference{*owner}
	if _, typed := obj.(*corev1.ConfigMap); typed {
		return &corev1.ConfigMap{TypeMeta: tm, ObjectMeta: t.ObjectMeta}, nil
	}
	return t, nil
}

// trimMeta is the identity of an object: what a cache, a reconcile and an Event about it need.
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// withValue is m with key set to v, made when nil.
func withValue(m map[string]string, key, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = v
	return m
}

// keep is m's value of key alone, cut to n bytes, or nil when m has none.
func keep(m map[string]string, key string, n int) map[string]string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	if len(v) > n {
		v = v[:n]
	}
	return map[string]string{key: v}
}

// namedPorts are the containers' named ports, the first maxCachedNamedPorts of them, each
// container with its name and those ports alone.
func namedPorts(containers []corev1.Container) []corev1.Container {
	var out []corev1.Container
	kept := 0
	for _, c := range containers {
		var ports []corev1.ContainerPort
		for _, cp := range c.Ports {
			if cp.Name != "" && kept < maxCachedNamedPorts {
				ports = append(ports, corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort, Protocol: cp.Protocol})
				kept++
			}
		}
		if len(ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: ports})
		}
	}
	return out
}
