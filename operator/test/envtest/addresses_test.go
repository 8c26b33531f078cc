package envtest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

// poolNamespace makes an opted-in namespace of the test's own, so that counting pods and claims
// sees no other test's.
func poolNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fsv1.InjectionLabel: "enabled"}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// withPool gives the vhost-user sample's port the IPv4 pool 10.56.3.10 to 10.56.3.<9+size>
// and an IPv6 pool as large: apart from the samples' own pools (10.56.0.10 and up, which the
// injector's goldens give the first pod), since the suite's stacks share one network.
func withPool(size int) fixtures.StackOption { return withPoolAt(3, size) }

// withPoolAt is withPool in 10.56.<block>.0/24 and 2001:db8:56::<block>:0: addresses are the
// network's, held apart across the cluster, so tests whose claims outlive them (no pod holds
// them until the grace ends) draw from blocks of their own.
func withPoolAt(block, size int) fixtures.StackOption {
	return func(si *fsv1.StackInstance) {
		p := &si.Spec.Ports[0]
		p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: fmt.Sprintf("10.56.%d.1", block),
			Pool: &fsv1.IPPool{Ranges: []string{fmt.Sprintf("10.56.%d.10-10.56.%d.%d", block, block, 9+size)}, PrefixLength: 24}}
		p.IPv6 = &fsv1.IPv6Address{From: fsv1.AddressPool,
			Pool: &fsv1.IPPool{Ranges: []string{fmt.Sprintf("2001:db8:56::%x:10-2001:db8:56::%x:%x", block, block, 0x10+size-1)}, PrefixLength: 64}}
	}
}

func poolPod(ns, stack string) *corev1.Pod {
	pod, err := fixtures.ReadPod("nginx-vhost")
	if err != nil {
		panic(err)
	}
	pod.Namespace, pod.Labels[fsv1.StackLabel] = ns, stack
	pod.Name, pod.GenerateName = "", stack+"-"
	return pod
}

// served reads the addresses a stored pod serves.
func served(t *testing.T, pod *corev1.Pod) []podcontract.ServedAddress {
	t.Helper()
	addrs, err := podcontract.ParseAddresses(pod.Annotations[podcontract.AddressesAnnotation])
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	return addrs
}

// listClaims are the claims of the pods of namespace ns: in the operator's namespace, whatever
// network.
func listClaims(t *testing.T, ns string) []fsv1.AddressClaim {
	t.Helper()
	var list fsv1.AddressClaimList
	if err := k8s.List(context.Background(), &list, client.InNamespace(operatorNS)); err != nil {
		t.Fatal(err)
	}
	var out []fsv1.AddressClaim
	for _, c := range list.Items {
		if c.Spec.PodNamespace == ns {
			out = append(out, c)
		}
	}
	return out
}

// Issue 30: 50 pods of a pool stack created at once through the webhook each get their own
// address (IPv4 and IPv6), the operator binds each claim to its pod, a full pool refuses the
// next pod naming the stack, the pool and the fix, and deleting the pods releases every address.
func TestPoolAddressesDistinctUnderConcurrentAdmission(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "pools")
	const pods, size = 50, 52
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withPool(size))
	testenv.CreateIfAbsent(t, k8s, si)

	created := make([]*corev1.Pod, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i] = poolPod(ns, si.Name)
			errs[i] = k8s.Create(ctx, created[i])
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	for i, pod := range created {
		if errs[i] != nil {
			t.Fatalf("pod %d: %v", i, errs[i])
		}
		addrs := served(t, pod)
		if len(addrs) != 2 || !addrs[0].Addr.Is4() || !addrs[1].Addr.Is6() {
			t.Fatalf("pod %s serves %v, want one IPv4 and one IPv6 address", pod.Name, addrs)
		}
		for _, a := range addrs {
			if other, dup := seen[a.Addr]; dup {
				t.Fatalf("pods %s and %s were both given %s", other, pod.Name, a.Addr)
			}
			seen[a.Addr] = pod.Name
		}
		// What the dataplane serves is the same address.
		spec, err := snapshot.Decode([]byte(pod.Annotations[podcontract.SpecAnnotation]), pod.Annotations[podcontract.SpecVersionAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := spec.Ports[0].IPv4.Address, addrs[0].Addr.String()+"/24"; got != want || spec.Ports[0].IPv4.From != fsv1.AddressStatic {
			t.Fatalf("pod %s: its spec snapshot serves %s (from %s), its annotation %s", pod.Name, got, spec.Ports[0].IPv4.From, want)
		}
	}
	// Every claim is bound to the pod that serves its address.
	testenv.Eventually(t, 60*time.Second, func() error {
		items := listClaims(t, ns)
		if len(items) != 2*pods {
			return fmt.Errorf("%d claims, want %d", len(items), 2*pods)
		}
		for _, c := range items {
			a, _ := netip.ParseAddr(c.Spec.Address)
			if c.Spec.PodUID == "" || c.Spec.Pod != seen[a] || c.Name != fsv1.NetworkAddressClaimName(dataNetwork, a) || len(c.OwnerReferences) != 0 {
				return fmt.Errorf("claim %s (%s) is bound to %q (%s), want pod %s by UID alone", c.Name, c.Spec.Address, c.Spec.Pod, c.Spec.PodUID, seen[a])
			}
		}
		return nil
	})

	// Two addresses left of each family, then the pool is full.
	for range size - pods {
		if err := k8s.Create(ctx, poolPod(ns, si.Name)); err != nil {
			t.Fatal(err)
		}
	}
	err := k8s.Create(ctx, poolPod(ns, si.Name))
	wantErr(t, err, `StackInstance "web"'s pool spec.ports[0].ipv4.pool is full`, "its 52 addresses", "add addresses to pool.ranges")

	// A dry run claims nothing.
	before := len(listClaims(t, ns))
	var all corev1.PodList
	if err := k8s.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &all.Items[0]); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := len(listClaims(t, ns)); n != before-2 {
			return fmt.Errorf("%d claims after deleting one pod, want %d", n, before-2)
		}
		return nil
	})
	if err := k8s.Create(ctx, poolPod(ns, si.Name), client.DryRunAll); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := len(listClaims(t, ns)); n != before-2 {
		t.Fatalf("a dry run left %d claims, want %d", n, before-2)
	}

	// Deleting the pods releases every address (the operator deletes a claim whose pod is gone;
	// envtest runs no garbage collector), and the pool serves again.
	if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := len(listClaims(t, ns)); n != 0 {
			return fmt.Errorf("%d claims left after the pods went", n)
		}
		return nil
	})
	again := poolPod(ns, si.Name)
	if err := k8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, again)
	// Deleted bound, its claim goes with it; deleted before the operator bound the claim, the
	// claim would wait out its grace (the suite's is long), holding the pool's first address from
	// the tests after this one.
	waitBound(t, claimKey("10.56.3.10"), again)
	if a := served(t, again)[0].Addr.String(); a != "10.56.3.10" {
		t.Errorf("after the release the first pod got %s, want the pool's first, 10.56.3.10", a)
	}
}

// Several webhook replicas, each with a cache that has seen no claim, claim from one pool at
// once: the API server's create is the only arbiter, and no address is given twice. A claim no
// pod came to hold (the admission's pod was refused later) is taken back after the grace.
func TestReplicasNeverShareAnAddress(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "replicas")
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withPoolAt(1, 40))
	prep, err := inject.Prepare(si, injectConfig())
	if err != nil {
		t.Fatal(err)
	}
	const replicas, each = 6, 6
	got := make([][]netip.Addr, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each replica its own client, as each operator pod has.
			c, err := client.New(restCfg, client.Options{Scheme: manager.Scheme()})
			if err != nil {
				errs[r] = err
				return
			}
			cl := &claims.Claimer{Writer: c, Cached: emptyCache{}, Live: c, Namespace: operatorNS, Grace: time.Hour}
			for i := range each {
				held, err := cl.Claim(ctx, claims.For{Namespace: ns, Stack: si.Name, Pod: fmt.Sprintf("replica-%d-pod-%d", r, i)}, prep.AddressNeeds())
				if err != nil {
					errs[r] = err
					return
				}
				got[r] = append(got[r], held.Addrs...)
			}
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for r := range replicas {
		if errs[r] != nil {
			t.Fatalf("replica %d: %v", r, errs[r])
		}
		for _, a := range got[r] {
			if seen[a] {
				t.Fatalf("%s was given twice", a)
			}
			seen[a] = true
		}
	}
	if len(seen) != 2*replicas*each {
		t.Fatalf("%d distinct addresses, want %d", len(seen), 2*replicas*each)
	}
	// 36 claims of 40 addresses, none held by a pod: the next 4 take the rest, the one after is
	// refused while the others are in their grace, and served once it is over.
	cl := &claims.Claimer{Writer: k8s, Cached: emptyCache{}, Live: k8s, Namespace: operatorNS, Grace: time.Hour}
	late := claims.For{Namespace: ns, Stack: si.Name, Pod: "late"}
	for range 40 - replicas*each {
		if _, err := cl.Claim(ctx, late, prep.AddressNeeds()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Claim(ctx, late, prep.AddressNeeds()); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Fatalf("a full pool whose claims are in their grace: want refused, got %v", err)
	}
	cl.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	held, err := cl.Claim(ctx, claims.For{Namespace: ns, Stack: si.Name, Pod: "later"}, prep.AddressNeeds())
	if err != nil {
		t.Fatalf("after the grace the claims no pod holds are taken back: %v", err)
	}
	if held.Addrs[0].String() != "10.56.1.10" {
		t.Errorf("took %s back, want the pool's first, 10.56.1.10", held.Addrs[0])
	}
}

// emptyCache is a replica's cache that has seen no claim yet.
type emptyCache struct{ client.Reader }

func (emptyCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// Issue 30: a static address serves one pod. A second pod is refused naming the pod that holds
// it and the fix, and is admitted once the first is gone.
func TestStaticAddressServesOnePod(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "static")
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"))
	testenv.CreateIfAbsent(t, k8s, si)
	first := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel(si.Name), fixtures.WithName("first"))
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := first.Annotations[podcontract.AddressesAnnotation]; got != "0:data=10.99.0.10" {
		t.Fatalf("addresses %q, want 0:data=10.99.0.10", got)
	}
	// Before the operator binds the claim, the holder is found by its name and addresses; after,
	// by its UID.
	second := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel(si.Name), fixtures.WithName("second"))
	wantErr(t, k8s.Create(ctx, second), "static address 10.99.0.10 (spec.ports[0].ipv4.address) is served by pod first",
		"from: Pool", "strategy Recreate")
	key := client.ObjectKey{Namespace: operatorNS, Name: fsv1.NetworkAddressClaimName(dataNetwork, netip.MustParseAddr("10.99.0.10"))}
	testenv.Eventually(t, 30*time.Second, func() error {
		c := &fsv1.AddressClaim{}
		if err := k8s.Get(ctx, key, c); err != nil {
			return err
		}
		if c.Spec.PodUID != string(first.UID) || c.Spec.Pod != "first" || c.Spec.PodNamespace != ns || c.Spec.Network != dataNetwork {
			return fmt.Errorf("claim %+v, want bound to pod first", c.Spec)
		}
		return nil
	})
	second = fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel(si.Name), fixtures.WithName("second"))
	wantErr(t, k8s.Create(ctx, second), "is served by pod first")

	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		second = fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel(si.Name), fixtures.WithName("second"))
		return k8s.Create(ctx, second)
	})
	if err := k8s.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitGone(t, key)

	// A claim no pod holds yet: "a pod being created".
	other := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "other"))
	testenv.CreateIfAbsent(t, k8s, other)
	pending := claims.New(operatorNS, dataNetwork, netip.MustParseAddr("10.99.0.10"), "other", "data", claims.Binding{Namespace: ns, Name: "someone"})
	if err := k8s.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	wantErr(t, k8s.Create(ctx, fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("other"), fixtures.WithName("third"))),
		"is served by a pod being created")
	if err := k8s.Delete(ctx, pending); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitGone(t, key)
}

// waitGone waits until the claim key names is gone.
func waitGone(t *testing.T, key client.ObjectKey) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		err := k8s.Get(context.Background(), key, &fsv1.AddressClaim{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim %s: %w", key.Name, err)
		}
		return fmt.Errorf("claim %s still there", key.Name)
	})
}
