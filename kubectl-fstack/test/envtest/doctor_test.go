package envtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

// doctor's node checks on an API server of its own, without the CRDs (doctor also serves before
// kube-fstack is installed), whose only nodes are the three made here.
func TestDoctor(t *testing.T) {
	kubeconfig, cs := startAPIServer(t)
	fit := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "hugepages-2Mi", Status: nodecheck.Pass, Detail: "512 total, 300 free, 512 allocatable"},
			{Name: "cpu-manager", Status: nodecheck.Pass, Detail: "policy static"},
		},
		Labels: map[string]string{fsv1.NodeLabelCPUManager: "static", fsv1.NodeLabelHugePages("2Mi"): "ready"},
	}
	unfit := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "hugepages-1Gi", Status: nodecheck.Fail, Detail: "0 total, 0 free", Fix: "reserve with hugepagesz=1G hugepages=N on the kernel command line"},
			{Name: "ovs-bridge", Status: nodecheck.Fail, Detail: `no bridge "br-fstack"`, Fix: "ovs-vsctl add-br br-fstack -- set bridge br-fstack datapath_type=netdev"},
			{Name: "aslr", Status: nodecheck.Warn, Detail: "kernel.randomize_va_space = 2", Fix: "sysctl -w kernel.randomize_va_space=0"},
		},
		Labels: map[string]string{fsv1.NodeLabelASLR: "on"},
	}
	createNode(t, cs, "node-a", fit)
	createNode(t, cs, "node-b", unfit)
	createNode(t, cs, "node-c", nil)

	out := doctor(t, kubeconfig, 0)
	for _, want := range []string{
		"node node-a: 0 of 2 checks need attention",
		"labels: node.kubefstack.io/cpu-manager=static node.kubefstack.io/hugepages-2Mi=ready",
		"node node-b: 3 of 3 checks need attention",
		"fix hugepages-1Gi: 0 total, 0 free: reserve with hugepagesz=1G hugepages=N on the kernel command line",
		`fix ovs-bridge: no bridge "br-fstack": ovs-vsctl add-br br-fstack`,
		"fix aslr: kernel.randomize_va_space = 2: sysctl -w kernel.randomize_va_space=0",
		"node node-c: no report: the kube-fstack node agent has not run there",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`\n  PASS +hugepages-2Mi +512 total, 300 free, 512 allocatable +`).MatchString(out) {
		t.Errorf("doctor output lacks node-a's hugepages-2Mi row:\n%s", out)
	}
	if strings.Contains(out, "fix hugepages-2Mi") || strings.Contains(out, "fix cpu-manager") {
		t.Errorf("a passing check got a fix line:\n%s", out)
	}

	one := doctor(t, kubeconfig, 0, "node-b")
	if strings.Contains(one, "node-a") || !strings.Contains(one, "node node-b:") {
		t.Errorf("doctor node-b printed other nodes or not node-b:\n%s", one)
	}
	// A NODE that does not exist: doctor could not look (2), not a problem found (1).
	if missing := doctor(t, kubeconfig, 2, "node-z"); !strings.Contains(missing, `node node-z: nodes "node-z" not found`) {
		t.Errorf("doctor of a missing node: %s", missing)
	}
}

func doctor(t *testing.T, kubeconfig string, wantCode int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(append([]string{"doctor", "--kubeconfig", kubeconfig}, args...), &stdout, &stderr)
	if code != wantCode {
		t.Fatalf("doctor %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

func createNode(t *testing.T, cs kubernetes.Interface, name string, r *nodecheck.Report) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if r != nil {
		n.Annotations = map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}
		for k, v := range r.Labels {
			n.Labels[k] = v
		}
	}
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startAPIServer starts kube-apiserver and etcd and returns an admin kubeconfig file and client.
func startAPIServer(t *testing.T) (string, kubernetes.Interface) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test-envtest`, which prepares kube-apiserver and etcd (hack/envtest-assets.sh)")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "doctor-test", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(admin.Config())
	if err != nil {
		t.Fatal(err)
	}
	return path, cs
}
