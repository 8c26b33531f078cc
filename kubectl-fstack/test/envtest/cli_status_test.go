package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

// `kubectl fstack status` against the API server, through a kubeconfig file as a user has one:
// a pod admitted before the spec changed runs the old config, one admitted after runs the
// current one, and each shows its node, its addresses, its dataplane's state and restarts. No
// operator runs: the test injects the pods as the webhook does (each with the pool address it
// would claim) and writes the StackInstance's status as the controller does once one of the two
// pods is ready. No kubelet either: the test writes the pods' node and container statuses.
func TestCLIStatusShowsPods(t *testing.T) {
	ctx := context.Background()
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(optedInNS, "shown"), withPool(4)) // two pods
	testenv.CreateIfAbsent(t, k8s, si)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	oldPod := statusPod(t, "shown-old", si.Name, "node-a", running, true, 2, "10.56.0.10", "2001:db8:56::10")
	oldHash := oldPod.Annotations[podcontract.ConfigHashAnnotation]

	cur := &fsv1.StackInstance{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(si), cur); err != nil {
		t.Fatal(err)
	}
	changed := cur.DeepCopy()
	changed.Spec.DPDK.PktTxDelayMicroseconds = new(int32(30))
	if err := k8s.Patch(ctx, changed, client.MergeFrom(cur)); err != nil {
		t.Fatal(err)
	}
	crashing := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	newPod := statusPod(t, "shown-new", si.Name, "node-b", crashing, false, 5, "10.56.0.11", "2001:db8:56::11")
	newHash := newPod.Annotations[podcontract.ConfigHashAnnotation]
	if oldHash == "" || oldHash == newHash {
		t.Fatalf("config hashes old %q new %q: the injection should record a different one after the spec change", oldHash, newHash)
	}
	writeStackStatus(t, optedInNS, si.Name, newHash, 1, 2)

	kubeconfig := writeKubeconfig(t)
	out := runCLI(t, "status", "--kubeconfig", kubeconfig, "-n", optedInNS, si.Name)
	t.Logf("kubectl fstack status:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^STACK +READY +POD +NODE +ADDRESSES +CONFIG-HASH +CONFIG +DATAPLANE +RESTARTS +APP-RESTARTS$`),
		regexp.MustCompile(fmt.Sprintf(`^shown +1/2 +shown-new +node-b +10\.56\.0\.11, 2001:db8:56::11 +%s +current +Waiting: CrashLoopBackOff +5 +0$`, newHash[:12])),
		regexp.MustCompile(fmt.Sprintf(`^shown +1/2 +shown-old +node-a +10\.56\.0\.10, 2001:db8:56::10 +%s +old \(current %s\) +Running, ready +2 +0$`, oldHash[:12], newHash[:12])),
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	// Every StackInstance of the namespace when none is named; the context's namespace without -n.
	if all := runCLI(t, "status", "--kubeconfig", kubeconfig); !strings.Contains(all, "shown-old") {
		t.Errorf("without -n (the context's namespace is %s) the table lacks the pods:\n%s", optedInNS, all)
	}
	// -o json: the same facts as fields, for scripts.
	var list cli.StackStatusList
	if err := json.Unmarshal([]byte(runCLI(t, "status", "--kubeconfig", kubeconfig, "-o", "json", si.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || len(list.Items[0].Pods) != 2 || list.Items[0].Pods[0].Name != "shown-new" ||
		list.Items[0].Pods[0].Config != "current" || list.Items[0].Pods[0].Dataplane.Reason != "CrashLoopBackOff" ||
		list.Items[0].Pods[1].Config != "old" || list.Items[0].Pods[1].Dataplane.Restarts != 2 || list.Items[0].ConfigHash != newHash {
		t.Errorf("status -o json: %+v", list)
	}
	// kubectl's conventions for scripts: -o name, and --no-headers (the rows alone).
	if got := runCLI(t, "status", "--kubeconfig", kubeconfig, "-o", "name", si.Name); got != "stackinstance.kubefstack.io/shown\n" {
		t.Errorf("status -o name = %q, want stackinstance.kubefstack.io/shown", got)
	}
	if rows := strings.Split(strings.TrimSpace(runCLI(t, "status", "--kubeconfig", kubeconfig, "--no-headers", si.Name)), "\n"); len(rows) != 2 || !want[1].MatchString(rows[0]) {
		t.Errorf("status --no-headers: want the 2 rows alone, got %q", rows)
	}
	// --sort-by orders the rows by the pod's fields (the old pod is on node-a); -l selects the
	// StackInstances by their labels, as kubectl get's.
	if rows := strings.Split(strings.TrimSpace(runCLI(t, "status", "--kubeconfig", kubeconfig, "--no-headers", "--sort-by", ".pod.node", si.Name)), "\n"); len(rows) != 2 || !want[2].MatchString(rows[0]) {
		t.Errorf("status --sort-by .pod.node: want shown-old first, got %q", rows)
	}
	labelled := cur.DeepCopy()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(si), labelled); err != nil {
		t.Fatal(err)
	}
	before := labelled.DeepCopy()
	labelled.Labels = map[string]string{"tier": "edge"}
	if err := k8s.Patch(ctx, labelled, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if got := runCLI(t, "status", "--kubeconfig", kubeconfig, "-A", "-l", "tier=edge", "-o", "name"); got != "stackinstance.kubefstack.io/shown\n" {
		t.Errorf("status -A -l tier=edge -o name = %q, want shown alone", got)
	}
	var stderr bytes.Buffer
	if code := cli.Run([]string{"status", "--kubeconfig", kubeconfig, "-l", "tier=core"}, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `no StackInstances in namespace "web" match -l tier=core`) {
		t.Errorf("status -l tier=core: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := cli.Run([]string{"status", "--kubeconfig", kubeconfig, "missing"}, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `StackInstance "missing" not found in namespace "web"`) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// withPool gives the stack's port 0 an IPv4 and an IPv6 pool of size addresses each, from
// 10.56.0.10 and 2001:db8:56::10.
func withPool(size int) fixtures.StackOption {
	return func(si *fsv1.StackInstance) {
		p := &si.Spec.Ports[0]
		p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.56.0.1",
			Pool: &fsv1.IPPool{Ranges: []string{fmt.Sprintf("10.56.0.10-10.56.0.%d", 9+size)}, PrefixLength: 24}}
		p.IPv6 = &fsv1.IPv6Address{From: fsv1.AddressPool,
			Pool: &fsv1.IPPool{Ranges: []string{fmt.Sprintf("2001:db8:56::10-2001:db8:56::%x", 0x10+size-1)}, PrefixLength: 64}}
	}
}

// statusPod creates a pod bound to stack, injected as the webhook injects it holding addrs (the
// pool addresses it would claim; none for a stack without a pool), and writes its node and its
// dataplane's status.
func statusPod(t *testing.T, name, stack, node string, state corev1.ContainerState, ready bool, restarts int32, addrs ...string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Namespace, pod.Name, pod.Labels[fsv1.StackLabel], pod.Spec.NodeName = optedInNS, name, stack, node
	held := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		held[i] = netip.MustParseAddr(a)
	}
	pod = injected(t, pod, stack, held...)
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, State: state,
		Ready: ready, RestartCount: restarts, Image: "x", ImageID: "x"}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// writeKubeconfig writes the suite's credentials as a kubeconfig whose context's namespace is the
// opted-in one.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restCfg.Host, CertificateAuthorityData: restCfg.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restCfg.CertData, ClientKeyData: restCfg.KeyData,
		Token: restCfg.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: optedInNS}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(os.TempDir(), "no-such-kubeconfig")) // --kubeconfig must win
	return path
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("kubectl fstack %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}
