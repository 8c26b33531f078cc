package envtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
	fswebhook "github.com/kube-fstack/kube-fstack/operator/internal/webhook"
)

// withStatic gives the vhost-user sample's port the static address a/24 (its gateway stays
// 10.99.0.1): each test of this file its own, since an address of the suite's network has one
// holder in the cluster.
func withStatic(a string) fixtures.StackOption {
	return func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4.Address = a + "/24" }
}

// claimKey is the name of the claim of a on the suite's network.
func claimKey(a string) client.ObjectKey {
	return client.ObjectKey{Namespace: operatorNS, Name: fsv1.NetworkAddressClaimName(dataNetwork, netip.MustParseAddr(a))}
}

func getClaim(t *testing.T, key client.ObjectKey) *fsv1.AddressClaim {
	t.Helper()
	c := &fsv1.AddressClaim{}
	if err := k8s.Get(context.Background(), key, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitBound waits until the claim key names is bound to pod.
func waitBound(t *testing.T, key client.ObjectKey, pod *corev1.Pod) *fsv1.AddressClaim {
	t.Helper()
	c := &fsv1.AddressClaim{}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := k8s.Get(context.Background(), key, c); err != nil {
			return err
		}
		if c.Spec.PodUID != string(pod.UID) || c.Spec.Pod != pod.Name || c.Spec.PodNamespace != pod.Namespace {
			return fmt.Errorf("claim %s: %+v, want bound to %s/%s (%s)", key.Name, c.Spec, pod.Namespace, pod.Name, pod.UID)
		}
		return nil
	})
	return c
}

// optedOutPod is a pod of stack that opted out of injection and says, in its own annotation, that
// it serves addresses: nothing of the injector's, only what its owner wrote.
func optedOutPod(t *testing.T, ns, name, stack, addresses string) *corev1.Pod {
	t.Helper()
	pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithName(name), fixtures.WithStackLabel(stack),
		fixtures.WithAnnotation(fsv1.InjectAnnotation, "false"), fixtures.WithAnnotation(podcontract.AddressesAnnotation, addresses))
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	return pod
}

// Issue 38 §2: two namespaces whose stacks name the same static address admit their pods at
// once; the address is the network's, so exactly one is admitted, and the other is refused
// without a name of the first namespace.
func TestStaticAddressHasOneHolderAcrossNamespaces(t *testing.T) {
	ctx := context.Background()
	nss := []string{poolNamespace(t, "claims-static-a"), poolNamespace(t, "claims-static-b")}
	errs := make([]error, len(nss))
	pods := make([]*corev1.Pod, len(nss))
	var wg sync.WaitGroup
	for i, ns := range nss {
		testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withStatic("10.99.0.140")))
		pods[i] = fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("web"), fixtures.WithName("web-"+ns))
	}
	for i := range nss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k8s.Create(ctx, pods[i])
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("both namespaces' pods: %v, %v; want exactly one admitted", errs[0], errs[1])
	}
	won, lost := 0, 1
	if errs[0] != nil {
		won, lost = 1, 0
	}
	testenv.DeleteAtEnd(t, k8s, pods[won])
	wantErr(t, errs[lost], `static address 10.99.0.140 (spec.ports[0].ipv4.address) is held on DataNetwork "envtest-net" by a pod of another namespace`)
	if msg := errs[lost].Error(); strings.Contains(msg, nss[won]) || strings.Contains(msg, pods[won].Name) {
		t.Fatalf("the refusal names the other namespace's pod: %s", msg)
	}
	c := waitBound(t, claimKey("10.99.0.140"), pods[won])
	if c.Spec.Network != dataNetwork || c.Labels[podcontract.ClaimNetworkLabel] != dataNetwork || len(c.OwnerReferences) != 0 {
		t.Fatalf("claim %+v labels %v owners %v", c.Spec, c.Labels, c.OwnerReferences)
	}
}

// Issue 38 §2: the pools of two namespaces overlap; pods of both admitted at once never share an
// address, and the pool's addresses held by the other namespace count as taken.
func TestPoolsOfTwoNamespacesNeverShareAnAddress(t *testing.T) {
	ctx := context.Background()
	nss := []string{poolNamespace(t, "claims-pool-a"), poolNamespace(t, "claims-pool-b")}
	const each, size = 5, 10
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for _, ns := range nss {
		testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withPoolAt(2, size)))
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pod := poolPod(ns, "web")
				if err := k8s.Create(ctx, pod); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, a := range served(t, pod) {
					if other, dup := seen[a.Addr]; dup {
						errs <- fmt.Errorf("pods %s and %s/%s were both given %s", other, ns, pod.Name, a.Addr)
					}
					seen[a.Addr] = ns + "/" + pod.Name
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantErr(t, k8s.Create(ctx, poolPod(nss[0], "web")), "is full", `on DataNetwork "envtest-net"`, "of any other that shares the network")
	for _, ns := range nss {
		if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	// A claim whose pod is deleted is released.
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := len(listClaims(t, nss[0])) + len(listClaims(t, nss[1])); n != 0 {
			return fmt.Errorf("%d claims left after the pods went", n)
		}
		return nil
	})
}

// shortGraceOperator runs another operator beside the suite's, whose --claim-grace is grace: the
// claims no pod holds are taken back by it after that, whatever the suite's operator waits.
func shortGraceOperator(t *testing.T, grace time.Duration) {
	t.Helper()
	wh := env.WebhookInstallOptions
	mgr, err := manager.New(restCfg, manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", Namespace: operatorNS, WebhookHost: wh.LocalServingHost, WebhookPort: freePort(t),
		CertDir: wh.LocalServingCertDir, Inject: injectConfig(), SecondInProcess: true, ClaimGrace: grace,
	}, ctrl.Log.WithName("short-grace"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the short-grace operator: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the short-grace operator's cache did not sync")
	}
}

// postReview posts review to the suite's pod webhook as the API server would (its client
// certificate): what anyone who reaches the webhook can do where no client CA is required.
func postReview(t *testing.T, review []byte) *admissionv1.AdmissionReview {
	t.Helper()
	wh := env.WebhookInstallOptions
	url := "https://" + net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)) + fswebhook.InjectPath
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wh.LocalServingCAData)
	cert, err := tls.LoadX509KeyPair(webhookClient.CertFile, webhookClient.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Post(url, "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, out); err != nil || out.Response == nil {
		t.Fatalf("answer %d %q is not an AdmissionReview: %v", resp.StatusCode, body, err)
	}
	return out
}

// forgedReview is an AdmissionReview of a pod's creation in ns that no API server sent: no pod
// follows it.
func forgedReview(t *testing.T, ns string, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "forged-1", Namespace: ns, Operation: admissionv1.Create,
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 38 §2: a forged AdmissionReview makes the claim of a real admission, whose pod never
// comes; it holds the address for the grace (--claim-grace) and no longer, and the address then
// serves a real pod.
func TestForgedReviewHoldsAnAddressOnlyForTheGrace(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "claims-forged")
	testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withStatic("10.99.0.141")))
	pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("web"), fixtures.WithName("never"))
	if out := postReview(t, forgedReview(t, ns, pod)); !out.Response.Allowed {
		t.Fatalf("the forged review: %+v, want it answered like the API server's", out.Response.Result)
	}
	key := claimKey("10.99.0.141")
	if c := getClaim(t, key); c.Spec.Pod != "never" || c.Spec.PodUID != "" {
		t.Fatalf("the forged review's claim: %+v", c.Spec)
	}
	wantErr(t, k8s.Create(ctx, fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("web"), fixtures.WithName("real"))),
		"is served by a pod being created")

	const grace = 3 * time.Second
	made := time.Now()
	shortGraceOperator(t, grace)
	waitGone(t, key)
	if held := time.Since(made); held > grace+20*time.Second {
		t.Fatalf("the claim was held %v, want about the grace, %v", held, grace)
	}
	real := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("web"), fixtures.WithName("real"))
	if err := k8s.Create(ctx, real); err != nil {
		t.Fatalf("after the grace the address serves a real pod: %v", err)
	}
	testenv.DeleteAtEnd(t, k8s, real)
	waitBound(t, key, real)
}

// A claim binds only the pod it was made for: a pod of the same stack whose own annotation names
// the address under another name never gets it, and once the claim is taken back the operator
// does not claim the address again for a pod that opted out of injection.
func TestClaimBindsOnlyThePodItWasMadeFor(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "claims-names")
	key := claimKey("10.99.0.142")
	made := claims.New(operatorNS, dataNetwork, netip.MustParseAddr("10.99.0.142"), "named", "data", claims.Binding{Namespace: ns, Name: "someone"})
	if err := k8s.Create(ctx, made); err != nil {
		t.Fatal(err)
	}
	optedOutPod(t, ns, "intruder", "named", "0:data=10.99.0.142")
	for range 6 {
		if c := getClaim(t, key); c.Spec.PodUID != "" {
			t.Fatalf("the claim made for pod someone was bound to %s (%s)", c.Spec.Pod, c.Spec.PodUID)
		}
		time.Sleep(500 * time.Millisecond)
	}
	shortGraceOperator(t, time.Second)
	waitGone(t, key)
	time.Sleep(3 * time.Second)
	if err := k8s.Get(ctx, key, &fsv1.AddressClaim{}); err == nil {
		t.Fatal("the address was claimed again for a pod that opted out of injection")
	}
}

// Every decision on a claim comes from the API objects: a claim bound to a pod that went while no
// operator watched is released, a pod whose claim went gets it back, and an operator started and
// stopped beside the suite's changes nothing that holds; the pod's deletion then leaves nothing.
func TestNothingLeaksAcrossARestart(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "claims-restart")
	ghost := claims.New(operatorNS, dataNetwork, netip.MustParseAddr("10.99.0.144"), "web", "data",
		claims.Binding{Namespace: ns, Name: "ghost", UID: "00000000-0000-0000-0000-00000000dead"})
	if err := k8s.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	waitGone(t, client.ObjectKeyFromObject(ghost))

	testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withStatic("10.99.0.143")))
	pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(ns), fixtures.WithStackLabel("web"), fixtures.WithName("restart-a"))
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	key := claimKey("10.99.0.143")
	first := waitBound(t, key, pod)
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := waitBound(t, key, pod)
	if again.UID == first.UID {
		t.Fatal("the claim was not made again")
	}

	func() {
		wh := env.WebhookInstallOptions
		mgr, err := manager.New(restCfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0", Namespace: operatorNS,
			WebhookHost: wh.LocalServingHost, WebhookPort: freePort(t), CertDir: wh.LocalServingCertDir, Inject: injectConfig(),
			SecondInProcess: true}, ctrl.Log.WithName("restarted"))
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = mgr.Start(mctx) }()
		mgr.GetCache().WaitForCacheSync(mctx)
		time.Sleep(3 * time.Second)
	}()
	if c := getClaim(t, key); c.UID != again.UID || c.ResourceVersion != again.ResourceVersion {
		t.Fatalf("another operator changed a held claim: %+v", c)
	}
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitGone(t, key)
}

// Upgrade: the claims an operator before DataNetworks made (in the pod's namespace, named after
// the stack, owned by their pod) move to the default network's claim bound to the same pod; one
// whose pod is gone is deleted; one whose new claim another pod holds stays, and its pod gets an
// AddressConflict Event.
func TestLegacyClaimsMoveToTheirNetwork(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "claims-legacy")
	legacy := func(addr string, owner *corev1.Pod, uid string) *fsv1.AddressClaim {
		a := netip.MustParseAddr(addr)
		c := &fsv1.AddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsv1.AddressClaimName("old", a),
			Labels: map[string]string{fsv1.StackLabel: "old"}},
			Spec: fsv1.AddressClaimSpec{StackInstance: "old", Address: addr, Port: "data", Pod: owner.Name}}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}}
		if uid != "" {
			c.OwnerReferences[0].UID = "00000000-0000-0000-0000-00000000beef"
		}
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	oldA := optedOutPod(t, ns, "old-a", "old", "0:data=10.99.0.145")
	moved := legacy("10.99.0.145", oldA, "")
	orphan := legacy("10.99.0.146", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, "gone")
	holder := optedOutPod(t, ns, "holder", "other", "0:data=10.99.0.147")
	if err := k8s.Create(ctx, claims.New(operatorNS, dataNetwork, netip.MustParseAddr("10.99.0.147"), "other", "data",
		claims.Binding{Namespace: ns, Name: "holder", UID: holder.UID})); err != nil {
		t.Fatal(err)
	}
	oldB := optedOutPod(t, ns, "old-b", "old", "0:data=10.99.0.147")
	kept := legacy("10.99.0.147", oldB, "")

	waitBound(t, claimKey("10.99.0.145"), oldA)
	waitGone(t, client.ObjectKeyFromObject(moved))
	waitGone(t, client.ObjectKeyFromObject(orphan))
	waitEvent(t, oldB, corev1.EventTypeWarning, controller.EventAddressConflict, "address 10.99.0.147 on DataNetwork envtest-net is held by pod holder")
	if c := getClaim(t, client.ObjectKeyFromObject(kept)); c.DeletionTimestamp != nil {
		t.Fatal("the legacy claim whose address another pod holds is going")
	}
	if c := getClaim(t, claimKey("10.99.0.147")); c.Spec.PodUID != string(holder.UID) {
		t.Fatalf("the holder's claim moved to %s", c.Spec.Pod)
	}
	for _, c := range []client.Object{kept, getClaim(t, claimKey("10.99.0.147")), getClaim(t, claimKey("10.99.0.145"))} {
		testenv.DeleteAtEnd(t, k8s, c)
	}
}

// A pod that arrives already injected (a copy of a running pod, a workload `kubectl fstack
// inject` wrote and applied to every replica) serves the address its spec snapshot names: the
// webhook claims it as an injection would, so the copy of a pod that holds its address is
// refused, and gets it once the original is gone.
func TestAnAlreadyInjectedCopyClaimsItsAddress(t *testing.T) {
	ctx := context.Background()
	ns := poolNamespace(t, "claims-copies")
	testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), withStatic("10.99.0.144")))
	original := poolPod(ns, "web")
	original.GenerateName, original.Name = "", "original"
	if err := k8s.Create(ctx, original); err != nil {
		t.Fatal(err)
	}
	waitBound(t, claimKey("10.99.0.144"), original)

	copyOf := func() *corev1.Pod {
		c := original.DeepCopy()
		c.ObjectMeta = metav1.ObjectMeta{Name: "copy", Namespace: ns, Labels: c.Labels, Annotations: c.Annotations}
		c.Spec.NodeName, c.Status = "", corev1.PodStatus{}
		return c
	}
	wantErr(t, k8s.Create(ctx, copyOf()), "metadata.labels[kubefstack.io/stack]", "10.99.0.144", "is served by pod original")

	if err := k8s.Delete(ctx, original, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, claimKey("10.99.0.144"))
	second := copyOf()
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatalf("the copy, once the original was gone: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, second, client.GracePeriodSeconds(0)) })
	waitBound(t, claimKey("10.99.0.144"), second)
}
