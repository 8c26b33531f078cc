package controller

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// maxCachedHash bounds the config-hash annotation a cached object keeps. The operator's hashes
// are 16 hex digits; a pod writes its own annotations, up to 256 KiB of them, and a longer value
// is kept cut short, which still differs from every hash (countPods counts it as another config).
const maxCachedHash = 64

// maxCachedAddresses bounds the addresses annotation a cached pod keeps: a value
// podcontract.ParseAddresses accepts (128 entries of <index>=<address>) is under 7 KiB, so
// one cut to this length is refused as the whole would have been.
const maxCachedAddresses = 8 << 10

// maxSnapshot is the largest spec snapshot the served addresses are read from (served's bound).
const maxSnapshot = 256 << 10

// TrimPod is the transform of the manager's pod cache: it keeps what the controllers read from a
// pod and drops the rest. That is its name, namespace, UID, resource version and deletion
// timestamp, the stack label alone among its labels, the config-hash annotation alone among its
// annotations (cut to maxCachedHash), its phase, the node it runs on (the node check metrics),
// its IP (the dataplane health events read /status there) and the name and readiness of the
// dataplane's status, an init container's or a program's regular one; for the EndpointSlice
// controller its Ready condition, its containers' named ports, the addresses annotation (cut to
// maxCachedAddresses) and the spec snapshot reduced to its ports' names and addressing, which
// is all served.Addresses reads of it. Every pod with the stack
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
	servedAnnotations(p.Annotations, t)
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
			t.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	for _, c := range p.Spec.Containers {
		var ports []corev1.ContainerPort
		for _, cp := range c.Ports {
			if cp.Name != "" {
				ports = append(ports, corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort, Protocol: cp.Protocol})
			}
		}
		if len(ports) > 0 {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: c.Name, Ports: ports})
		}
	}
	// A program's dataplane (spec.program) is a regular container: its readiness only.
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == podcontract.DataplaneContainer {
			t.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: s.Name, Ready: s.Ready}}
		}
	}
	return t, nil
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
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp}
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

// servedAnnotations keeps in t what served.Addresses reads of annotations: the addresses
// annotation, the spec version, and the spec snapshot reduced to its ports' names and
// addressing. The snapshot is a pod's to write, up to its 256 KiB of annotations; reduced, a
// stack's podcontract.MaxPorts ports at most cost a few KiB. A snapshot that does not decode (or is over served's
// bound) is kept as a short value that does not either, so the pod is skipped as it would have
// been.
func servedAnnotations(a map[string]string, t *corev1.Pod) {
	set := func(k, v string) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = v
	}
	if v, ok := a[podcontract.AddressesAnnotation]; ok {
		set(podcontract.AddressesAnnotation, v[:min(len(v), maxCachedAddresses)])
	}
	if v, ok := a[podcontract.SpecVersionAnnotation]; ok {
		set(podcontract.SpecVersionAnnotation, v[:min(len(v), maxCachedHash)])
	}
	raw, ok := a[podcontract.SpecAnnotation]
	if !ok {
		return
	}
	set(podcontract.SpecAnnotation, reducedSnapshot(raw))
}

const (
	maxSnapshotPorts = podcontract.MaxPorts
	maxSnapshotField = 64
)

// undecodable stands for a snapshot the served addresses cannot be read from.
const undecodable = "<not a spec snapshot>"

func reducedSnapshot(raw string) string {
	if len(raw) > maxSnapshot {
		return undecodable
	}
	spec := &fsv1.StackInstanceSpec{}
	if err := json.Unmarshal([]byte(raw), spec); err != nil {
		return undecodable
	}
	// The CRD's bounds, which an annotation never met: podcontract.MaxPorts ports, names of 32 characters, and an
	// address with its prefix is at most 43. A snapshot beyond them is not the injector's.
	if len(spec.Ports) > maxSnapshotPorts {
		return undecodable
	}
	reduced := &fsv1.StackInstanceSpec{Ports: make([]fsv1.PortSpec, len(spec.Ports))}
	for i := range spec.Ports {
		p, r := &spec.Ports[i], &reduced.Ports[i]
		if len(p.Name) > maxSnapshotField {
			return undecodable
		}
		r.Name = p.Name
		if v4 := p.IPv4; v4 != nil {
			if len(v4.Address) > maxSnapshotField || len(v4.From) > maxSnapshotField {
				return undecodable
			}
			r.IPv4 = &fsv1.IPv4Address{From: v4.From, Address: v4.Address}
		}
		if v6 := p.IPv6; v6 != nil {
			if len(v6.Address) > maxSnapshotField || len(v6.From) > maxSnapshotField {
				return undecodable
			}
			r.IPv6 = &fsv1.IPv6Address{From: v6.From, Address: v6.Address}
		}
	}
	out, err := json.Marshal(reduced)
	if err != nil {
		return undecodable
	}
	return string(out)
}
