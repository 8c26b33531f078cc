package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/served"
)

// A trimmed pod counts as the whole pod does, and carries nothing else of the spec or status.
func TestTrimPodKeepsWhatCountPodsReads(t *testing.T) {
	now := metav1.Now()
	pod := func(phase corev1.PodPhase, ready bool, hash string, deleted *metav1.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", DeletionTimestamp: deleted,
				Labels:        map[string]string{"kubefstack.io/stack": "web"},
				Annotations:   map[string]string{podcontract.ConfigHashAnnotation: hash},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: phase,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: ready, Image: "dp"}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Ready: true}}},
		}
	}
	full := []corev1.Pod{*pod(corev1.PodRunning, true, "a", nil), *pod(corev1.PodRunning, false, "b", nil),
		*pod(corev1.PodPending, false, "", nil), *pod(corev1.PodSucceeded, true, "a", nil), *pod(corev1.PodRunning, true, "a", &now)}
	trimmed := make([]corev1.Pod, len(full))
	for i := range full {
		out, err := TrimPod(&full[i])
		if err != nil {
			t.Fatal(err)
		}
		trimmed[i] = *out.(*corev1.Pod)
	}
	if got, want := countPods(trimmed, "a"), countPods(full, "a"); got != want {
		t.Fatalf("trimmed pods count %+v, whole pods %+v", got, want)
	}
	p := trimmed[0]
	if len(p.Spec.Containers) != 0 || p.ManagedFields != nil || p.Status.ContainerStatuses != nil || p.Status.InitContainerStatuses[0].Image != "" {
		t.Fatalf("trimmed pod kept more than the controller reads: %+v", p)
	}
	if p.Labels["kubefstack.io/stack"] != "web" || p.Spec.NodeName != "n1" || full[0].ManagedFields == nil {
		t.Fatal("trimming lost the labels or the node, or changed the original")
	}
	// The health events read /status at the pod's IP; a program's dataplane is a regular container.
	prog := pod(corev1.PodRunning, false, "a", nil)
	prog.Status.PodIP = "10.0.0.7"
	prog.Status.ContainerStatuses = append(prog.Status.ContainerStatuses, corev1.ContainerStatus{Name: podcontract.DataplaneContainer, Ready: true, Image: "x"})
	prog.Status.InitContainerStatuses = nil
	out, _ := TrimPod(prog)
	if tp := out.(*corev1.Pod); tp.Status.PodIP != "10.0.0.7" || len(tp.Status.ContainerStatuses) != 1 || !dataplaneReady(tp) || tp.Status.ContainerStatuses[0].Image != "" {
		t.Fatalf("trimmed program pod %+v", tp.Status)
	}
	// The EndpointSlice controller reads the Ready condition and the named container ports.
	svc := pod(corev1.PodRunning, true, "a", nil)
	svc.Spec.Containers = append(svc.Spec.Containers, corev1.Container{Name: "web", Image: "nginx",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}})
	svc.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "m"}}
	out, _ = TrimPod(svc)
	if tp := out.(*corev1.Pod); !podReady(tp) || len(tp.Status.Conditions) != 1 || tp.Status.Conditions[0].Message != "" ||
		len(tp.Spec.Containers) != 1 || tp.Spec.Containers[0].Image != "" || containerPort(tp, "http", corev1.ProtocolTCP) != 80 {
		t.Fatalf("trimmed pod for the EndpointSlices: %+v %+v", tp.Spec.Containers, tp.Status.Conditions)
	}
	if out, _ := TrimPod("not a pod"); out != "not a pod" {
		t.Fatal("a non-pod (a tombstone) must pass through")
	}
}

// A pod writes its own labels and annotations: whatever it carries, the cached copy keeps the
// stack label and a bounded config hash only, and still counts as the whole pod.
func TestTrimPodDropsWhatATenantWrites(t *testing.T) {
	big := strings.Repeat("x", 250<<10)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", UID: "u", ResourceVersion: "7",
		Labels:          map[string]string{"kubefstack.io/stack": "web", "team": "a", strings.Repeat("k", 60): "v"},
		Annotations:     map[string]string{"filler": big, podcontract.ConfigHashAnnotation: "a" + big},
		OwnerReferences: []metav1.OwnerReference{{Name: big}}, Finalizers: []string{big}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "other", Ready: true}, {Name: podcontract.DataplaneContainer, Ready: true}}}}
	out, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	tp := out.(*corev1.Pod)
	if len(tp.Labels) != 1 || tp.Labels["kubefstack.io/stack"] != "web" || len(tp.Annotations) != 1 ||
		len(tp.Annotations[podcontract.ConfigHashAnnotation]) != maxCachedHash || tp.OwnerReferences != nil || tp.Finalizers != nil ||
		tp.UID != "u" || tp.ResourceVersion != "7" || len(tp.Status.InitContainerStatuses) != 1 || !dataplaneReady(tp) {
		t.Fatalf("trimmed pod: labels %v, %d annotations, owners %d, finalizers %d, statuses %+v", tp.Labels,
			len(tp.Annotations), len(tp.OwnerReferences), len(tp.Finalizers), tp.Status.InitContainerStatuses)
	}
	if got := countPods([]corev1.Pod{*tp}, "a"); got.Older != 1 || got.Bound != 1 || got.Ready != 1 {
		t.Fatalf("a hash cut short must still count as another config: %+v", got)
	}
	if size := len(tp.String()); size > 2048 {
		t.Fatalf("the trimmed pod prints as %d bytes; want a few hundred", size)
	}
}

// Only a ConfigMap shaped as the operator writes it (<stack>-fstack, controlled by that
// StackInstance) keeps its labels, hash and controller; any other with the label is a bare name.
func TestTrimConfigMapKeepsOnlyTheOperatorsOwn(t *testing.T) {
	big := strings.Repeat("x", 250<<10)
	ctl := true
	owner := metav1.OwnerReference{APIVersion: "kubefstack.io/v1alpha1", Kind: "StackInstance", Name: "web", UID: "s", Controller: &ctl}
	cm := func(name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", UID: "c",
			Labels:          map[string]string{ManagedByLabel: ManagedBy, "kubefstack.io/stack": "web", "extra": "y"},
			Annotations:     map[string]string{podcontract.ConfigHashAnnotation: "0123456789abcdef", "filler": big},
			OwnerReferences: owners}}
	}
	out, _ := TrimConfigMap(cm("web-fstack", owner, metav1.OwnerReference{Name: big}))
	own := out.(*metav1.PartialObjectMetadata)
	if len(own.Labels) != 2 || len(own.Annotations) != 1 || own.Annotations[podcontract.ConfigHashAnnotation] != "0123456789abcdef" ||
		len(own.OwnerReferences) != 1 || own.OwnerReferences[0].UID != "s" {
		t.Fatalf("the operator's ConfigMap trimmed to labels %v, %d annotations, owners %v", own.Labels, len(own.Annotations), own.OwnerReferences)
	}
	notOurs := owner
	notOurs.Kind = "Deployment"
	for name, o := range map[string]*metav1.PartialObjectMetadata{
		"other name": cm("tenant", owner), "no controller": cm("web-fstack"), "other controller": cm("web-fstack", notOurs),
	} {
		out, _ := TrimConfigMap(o)
		got := out.(*metav1.PartialObjectMetadata)
		if got.Labels != nil || got.Annotations != nil || got.OwnerReferences != nil || got.Name != o.Name {
			t.Errorf("%s: kept %+v, want the bare name", name, got.ObjectMeta)
		}
	}
	if out, _ := TrimConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"k": big}}); len(out.(*corev1.ConfigMap).Data) != 0 {
		t.Fatal("a typed ConfigMap kept its data")
	}
}

// The EndpointSlice controller reads the served addresses from the cached pod: the cached pod
// gives the same addresses as the whole one, keeps none of the spec snapshot (the addresses
// annotation is the one carrier of served addresses), and a pod's hostile annotations cost the
// cache a few KiB at most, refused as they were.
func TestTrimPodKeepsTheServedAddresses(t *testing.T) {
	spec := fsv1.StackInstanceSpec{Ports: []fsv1.PortSpec{
		{Name: "svc", Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.0.5/24", Gateway: "10.0.0.1"}}},
		{Name: "data", Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "192.168.7.2/24"}}},
	}}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(snapshot string, extra map[string]string) *corev1.Pod {
		a := map[string]string{podcontract.SpecAnnotation: snapshot}
		for k, v := range extra {
			a[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: a}}
	}
	trim := func(p *corev1.Pod) *corev1.Pod {
		out, err := TrimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Pod)
	}
	for _, extra := range []map[string]string{nil, {podcontract.AddressesAnnotation: "0:svc=10.0.0.7,1:data=192.168.7.9"}} {
		whole := pod(string(raw), extra)
		cached := trim(whole)
		if _, kept := cached.Annotations[podcontract.SpecAnnotation]; kept {
			t.Errorf("the cached pod keeps the spec snapshot")
		}
		for _, port := range []string{"", "data", "1", "nope"} {
			want, werr := served.Addresses(whole, port)
			got, gerr := served.Addresses(cached, port)
			if fmt.Sprint(want) != fmt.Sprint(got) || (werr == nil) != (gerr == nil) {
				t.Errorf("port %q: cached pod serves %v (%v), the whole pod %v (%v)", port, got, gerr, want, werr)
			}
		}
	}
	hostile := spec
	hostile.Ports = append([]fsv1.PortSpec(nil), spec.Ports...)
	hostile.Ports[0].VIPs = []string{strings.Repeat("1", 250<<10)}
	raw, _ = json.Marshal(hostile)
	cached := trim(pod(string(raw), map[string]string{podcontract.AddressesAnnotation: strings.Repeat("0=10.0.0.7,", 20<<10)}))
	if n := len(cached.Annotations[podcontract.SpecAnnotation]) + len(cached.Annotations[podcontract.AddressesAnnotation]); n > 12<<10 {
		t.Errorf("a hostile snapshot and addresses cost the cache %d bytes", n)
	}
	if _, err := served.Addresses(cached, ""); err == nil {
		t.Error("the cut addresses annotation was read as valid")
	}
}

// The cache keeps the dataplane's status token, which the health events send, on the container
// that holds it (a program's dataplane is a regular one, beside its named ports), and only one
// podcontract accepts: a pod's creator can write 1 MiB there.
func TestTrimPodKeepsTheStatusToken(t *testing.T) {
	token := strings.Repeat("ab", 32)
	prog := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podcontract.DataplaneContainer, Image: "dp",
		Ports: []corev1.ContainerPort{{Name: podcontract.MetricsPortName, ContainerPort: podcontract.SupervisorPort}},
		Env:   []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", 1<<20)}, {Name: podcontract.EnvStatusToken, Value: token}}}}}}
	out, _ := TrimPod(prog)
	tp := out.(*corev1.Pod)
	if len(tp.Spec.Containers) != 1 || len(tp.Spec.Containers[0].Ports) != 1 || len(tp.Spec.Containers[0].Env) != 1 ||
		tp.Spec.Containers[0].Env[0].Value != token || tp.Spec.InitContainers != nil {
		t.Fatalf("trimmed program pod %+v", tp.Spec)
	}
	hostile := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: podcontract.DataplaneContainer,
		Env: []corev1.EnvVar{{Name: podcontract.EnvStatusToken, Value: strings.Repeat("a", 1<<20)}}}}}}
	out, _ = TrimPod(hostile)
	if tp := out.(*corev1.Pod); tp.Spec.InitContainers != nil || tp.Spec.Containers != nil {
		t.Fatalf("a token podcontract refuses was kept: %d containers", len(tp.Spec.InitContainers))
	}
}
