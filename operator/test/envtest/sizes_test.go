package envtest

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// Issue 23, hostile sizes: what the audit did with a real kube-apiserver, refused.

// withTunables gives si n FreeBSD tunables of about 380 bytes each in the snapshot, every one
// within the CRD's bounds; marker varies the values, so that each update is a new generation with
// new text.
func withTunables(si *fsv1.StackInstance, n int, marker string) *fsv1.StackInstance {
	fixtures.WithTunables(n, marker)(si)
	return si
}

// A 1 MiB image was admitted: the CRD now refuses it, and so does the offline path (the CLI and
// the dataplane run render's schema check on a spec that never met the API server).
func TestHugeImageRefused(t *testing.T) {
	si := stack(t, "vhost-user", "huge-image")
	si.Spec.Dataplane.Image = allowedImages + strings.Repeat("x", 1<<20)
	err := k8s.Create(context.Background(), si)
	wantErr(t, err, "spec.dataplane.image", "Too long", "1024")
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid status, got %v", err)
	}
	if len(err.Error()) > 4096 {
		t.Errorf("the refusal echoes the image: %d bytes", len(err.Error()))
	}
	_, errs := render.Prepare(&si.Spec)
	if len(errs) == 0 || errs[0].Field != "spec.dataplane.image" || !strings.Contains(errs[0].Error(), "1024") {
		t.Fatalf("offline: want spec.dataplane.image refused as longer than 1024, got %v", errs.ToAggregate())
	}
}

// A quantity of 64 KiB of digits passes the quantity pattern; decoding one into a Go quantity
// costs time quadratic in its length, in the operator's informer and webhook. The API server
// refuses it before anything decodes it. Sent untyped: a Go quantity would print it clamped.
func TestHugeQuantityRefused(t *testing.T) {
	si := stack(t, "vhost-user", "huge-quantity")
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(si)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(fsv1.GroupVersion.WithKind("StackInstance"))
	if err := unstructured.SetNestedField(u.Object, strings.Repeat("9", 64<<10), "spec", "pcap", "fileSize"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, true, "spec", "pcap", "enabled"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, k8s.Create(context.Background(), u), "spec.pcap.fileSize", "a quantity of at most 64 characters")
}

// A spec within every field's bound whose snapshot cannot fit in a pod's annotations is refused
// when it is written, not when its first pod is.
func TestOversizeSnapshotRefused(t *testing.T) {
	ctx := context.Background()
	si := withTunables(stack(t, "vhost-user", "oversize-snapshot"), 400, "x")
	wantErr(t, k8s.Create(ctx, si), "spec: Forbidden", podcontract.SpecAnnotation, "128 KiB", "256 KiB")
	fits := withTunables(stack(t, "vhost-user", "large-snapshot"), 300, "x")
	if err := k8s.Create(ctx, fits); err != nil {
		t.Fatalf("a spec whose snapshot fits was refused: %v", err)
	}
	wantErr(t, updateStack(ctx, fits.Name, func(s *fsv1.StackInstance) { withTunables(s, 400, "y") }),
		"spec: Forbidden", "128 KiB")
}

// A pod that arrives with a forged status annotation is not injected, but its dataplane image
// still passes the allow-list, and it cannot drop its stack label afterwards.
func TestForgedStatusPodRefused(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "vhost-user", "vhost-user"))
	forged := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithName("forged-image"),
		fixtures.WithAnnotation(fsv1.StatusAnnotation, `{"stack":"vhost-user"}`))
	forged.Spec.InitContainers = []corev1.Container{{
		Name: podcontract.DataplaneContainer, Image: "registry.example:31337/fstack/dataplane:v1",
		RestartPolicy: new(corev1.ContainerRestartPolicyAlways),
	}}
	wantErr(t, k8s.Create(ctx, forged), "spec.initContainers[0].image", "--allowed-dataplane-images")

	claims := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithName("forged-label"),
		fixtures.WithAnnotation(fsv1.StatusAnnotation, `{"stack":"vhost-user"}`))
	if err := k8s.Create(ctx, claims); err != nil {
		t.Fatalf("a pod claiming injection, with nothing to check, was refused: %v", err)
	}
	wantErr(t, updatePod(ctx, claims.Name, func(p *corev1.Pod) { delete(p.Labels, fsv1.StackLabel) }),
		"metadata.labels[kubefstack.io/stack]: Forbidden")
}

// The audit's heap growth: 30 rounds of (update the StackInstance, create a pod) grew the
// operator's heap by 2 MiB each, every generation's rendering kept. The webhook runs in this
// process (startManager), so its heap is this process's.
//
// Each round here writes a spec near the largest admission allows (a ~115 KiB snapshot), waits
// until the controller has seen it (so the webhook's cache has it too), and creates a pod with
// dryRun (the webhook renders and injects; nothing is stored, so the pods themselves cost the
// caches nothing). Keeping every generation costs at least the snapshot and the decoded spec
// per round, ~230 KiB, over 22 MiB for 100 rounds; keeping the latest costs one rendering. The
// bound, 4 MiB, is the latter with room for the allocator and the other caches' churn (measured:
// under 0.5 MiB).
func TestOperatorHeapFlatOverStackUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("100 rounds of StackInstance updates")
	}
	ctx := context.Background()
	si := withTunables(stack(t, "vhost-user", "heap"), 300, "r0-")
	if err := k8s.Create(ctx, si); err != nil {
		t.Fatal(err)
	}
	round := func(i int) {
		marker := fmt.Sprintf("r%d-", i)
		if err := updateStack(ctx, si.Name, func(s *fsv1.StackInstance) { withTunables(s, 300, marker) }); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		waitObserved(t, si.Name)
		pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithName("heap"), fixtures.WithStackLabel(si.Name))
		if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			t.Fatalf("round %d: create the pod: %v", i, err)
		}
		if !strings.Contains(pod.Annotations[podcontract.SpecAnnotation], marker) {
			t.Fatalf("round %d: the pod was injected from another generation", i)
		}
	}
	for i := 1; i <= 5; i++ { // warm up: informers, TLS, the first renderings
		round(i)
	}
	before := heapAlloc()
	for i := 6; i < 106; i++ {
		round(i)
	}
	growth := int64(heapAlloc()) - int64(before)
	t.Logf("heap after 100 rounds: %+.1f MiB", float64(growth)/(1<<20))
	const bound = 4 << 20
	if growth > bound {
		t.Fatalf("the operator's heap grew by %.1f MiB over 100 rounds of (update the StackInstance, create a pod); want under %d MiB",
			float64(growth)/(1<<20), bound>>20)
	}
}

func heapAlloc() uint64 {
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC() // the first cycle's finalizers free more in the second
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitObserved waits until the controller has reconciled the StackInstance's latest generation.
func waitObserved(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		si := &fsv1.StackInstance{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: optedInNS, Name: name}, si); err != nil {
			return err
		}
		if si.Status.ObservedGeneration != si.Generation {
			return fmt.Errorf("observed generation %d of %d", si.Status.ObservedGeneration, si.Generation)
		}
		return nil
	})
}

// updateStack applies change to the stored StackInstance, retrying on conflicts.
func updateStack(ctx context.Context, name string, change func(*fsv1.StackInstance)) error {
	for {
		si := &fsv1.StackInstance{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: name}, si); err != nil {
			return err
		}
		change(si)
		if err := k8s.Update(ctx, si); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// Issue 31: the operator caches every pod with the stack label and every ConfigMap with its
// managed-by label, in any namespace, and a tenant writes both, up to 256 KiB of annotations
// each: whole, 1000 of them were a quarter GiB of the operator's heap, past the chart's 256Mi
// limit (a crash loop, and with failurePolicy Fail no pod injected anywhere). Here a namespace
// that never opted in gets 500 such pods and 500 such ConfigMaps of ~250 KiB each; once the
// operator's cache holds them all, its heap has grown by their trimmed size, a few hundred
// bytes each (measured: under 2 MiB in all), not by their 250 MiB.
func TestOperatorHeapFlatOverTenantObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 objects of 250 KiB")
	}
	const ns, n = "tenant-heap", 500
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))
		_ = k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns))
	})
	filler := strings.Repeat("x", 250<<10)
	create := func(i int) error {
		labels := map[string]string{fsv1.StackLabel: "tenant", "app.kubernetes.io/managed-by": "kube-fstack"}
		annotations := map[string]string{"filler": filler}
		meta := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tenant-%d-fstack", i), Labels: labels, Annotations: annotations}
		pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			return fmt.Errorf("pod %d: %w", i, err)
		}
		if err := k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}); err != nil {
			return fmt.Errorf("ConfigMap %d: %w", i, err)
		}
		return nil
	}
	before := heapAlloc()
	inParallel(t, n, create)
	// The operator's own informers: the pods' typed one, the ConfigMaps' metadata one.
	testenv.Eventually(t, 2*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := operatorCache.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		cms := &metav1.PartialObjectMetadataList{}
		cms.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := operatorCache.List(ctx, cms, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != n || len(cms.Items) != n {
			return fmt.Errorf("the operator's cache holds %d of the %d pods and %d of the %d ConfigMaps", len(pods.Items), n, len(cms.Items), n)
		}
		return nil
	})
	growth := int64(heapAlloc()) - int64(before)
	t.Logf("heap after %d pods and %d ConfigMaps of 250 KiB: %+.1f MiB", n, n, float64(growth)/(1<<20))
	const bound = 8 << 20
	if growth > bound {
		t.Fatalf("the operator's heap grew by %.1f MiB with %d tenant pods and ConfigMaps of 250 KiB; want under %d MiB",
			float64(growth)/(1<<20), 2*n, bound>>20)
	}
}

// Issue 38, hostile sizes the trims did not bound: a pod's named container ports (the
// EndpointSlice controller resolves a Service's named targetPort against them) and a Service's
// selector and ports. Measured before: 100 pods with 20,000 valid named ports each, +158.5 MiB of
// the operator's heap; 100 Services with 1.4 MB selectors, +159.8 MiB. Here, in a namespace that
// never opted in, both arrive and the heap stays flat: the cache keeps 64 named ports a pod, one
// selector entry and 100 ports a Service.
func TestOperatorHeapFlatOverHostilePortsAndSelectors(t *testing.T) {
	if testing.Short() {
		t.Skip("200 objects of about 1 MB")
	}
	const ns, n, ports, selectors = "tenant-ports", 100, 20000, 20000
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))
		for i := range n {
			_ = k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%d", i)}})
		}
	})
	cports := make([]corev1.ContainerPort, ports)
	for i := range cports {
		cports[i] = corev1.ContainerPort{Name: fmt.Sprintf("p%x", i), ContainerPort: int32(1 + i%65535)}
	}
	selector := make(map[string]string, selectors)
	for i := range selectors {
		selector[fmt.Sprintf("example.com/key-%06d", i)] = strings.Repeat("v", 40)
	}
	create := func(i int) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{fsv1.StackLabel: "tenant"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Ports: cports}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			return fmt.Errorf("pod %d: %w", i, err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%d", i),
			Annotations: map[string]string{podcontract.ServiceStackAnnotation: "tenant"}},
			Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if err := k8s.Create(ctx, svc); err != nil {
			return fmt.Errorf("service %d: %w", i, err)
		}
		return nil
	}
	before := heapAlloc()
	inParallel(t, n, create)
	testenv.Eventually(t, 3*time.Minute, func() error {
		pods, svcs := &corev1.PodList{}, &corev1.ServiceList{}
		if err := operatorCache.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := operatorCache.List(ctx, svcs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != n || len(svcs.Items) != n {
			return fmt.Errorf("the operator's cache holds %d of the %d pods and %d of the %d Services", len(pods.Items), n, len(svcs.Items), n)
		}
		if got := len(pods.Items[0].Spec.Containers[0].Ports); got != 64 {
			return fmt.Errorf("a cached pod keeps %d named ports, want 64", got)
		}
		return nil
	})
	growth := int64(heapAlloc()) - int64(before)
	t.Logf("heap after %d pods of %d named ports and %d Services of %d selector entries: %+.1f MiB", n, ports, n, selectors, float64(growth)/(1<<20))
	const bound = 8 << 20
	if growth > bound {
		t.Fatalf("the operator's heap grew by %.1f MiB; want under %d MiB", float64(growth)/(1<<20), bound>>20)
	}
}

// inParallel runs create(0..n-1) on 4 workers and fails on the first error.
func inParallel(t *testing.T, n int, create func(int) error) {
	t.Helper()
	work, errs := make(chan int), make(chan error, n)
	for range 4 {
		go func() {
			for i := range work {
				errs <- create(i)
			}
		}()
	}
	go func() {
		for i := range n {
			work <- i
		}
		close(work)
	}()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
