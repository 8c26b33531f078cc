package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/fstackini"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(args, &o, &e)
	return o.String(), e.String(), code
}

// sample is the path of a file of config/samples, written out of the fixtures for the CLI's -f.
func sample(t *testing.T, name string) string { return fixtures.Path(t, "samples/"+name) }

func TestRenderMatchesGolden(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "nginx-shim.yaml"), "--cpus", "8-11", "--app-cpus", "12-15")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "..", "internal", "render", "testdata", "golden", "nginx-shim.ini"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("CLI output differs from the renderer's golden:\n%s", out)
	}
}

func TestRenderFactsFromFlags(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "sriov.yaml"), "--cpus", "4,6",
		"--pci", "intel.com/sriov_dpdk=0000:5e:02.3", "--addr", "vf=10.56.0.33/24,10.56.0.1", "--eal", "--proc-id", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"lcore_mask=50", "allow=0000:5e:02.3", "addr=10.56.0.33", "gateway=10.56.0.1",
		"# eal proc 1: f-stack -c40 -n4 --proc-type=secondary --allow=0000:5e:02.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "# eal proc 0") {
		t.Error("--proc-id 1 printed process 0 too")
	}
	if _, err := fstackini.Parse([]byte(out), fstackini.V125); err != nil {
		t.Errorf("output with --eal must stay a config F-Stack reads: %v", err)
	}
}

// A pool port's --addr is the address one pod took: one of the pool's, with its prefix length.
func TestRenderPoolAddrMustBeThePools(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"vf=10.1.2.3/24,10.56.0.1", "10.1.2.3 is not an address of the port's pool (spec.ports[0].ipv4.pool)"},
		{"vf=10.56.0.20/16,10.56.0.1", "the pool's prefix length is 24, not 16"},
		{"vf=10.56.0.20/24,10.56.0.2", "the port's gateway is 10.56.0.1 (spec.ports[0].ipv4.gateway), not 10.56.0.2"},
	} {
		_, errOut, code := run(t, "render", "-f", sample(t, "sriov.yaml"), "--addr", tc.addr)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("--addr %s: exit %d, want the error %q, got %s", tc.addr, code, tc.want, errOut)
		}
	}
}

// An SR-IOV port cannot take its address from IPAM (sriov-cni writes no device info): render
// refuses what would stop on the node.
func TestRenderRefusesAttachmentAddressOnPCI(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.yaml")
	stack := "apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: s}\nspec:\n  ports:\n" +
		"  - name: vf\n    device: {pci: {resource: intel.com/sriov_dpdk}}\n    ipv4: {from: Attachment}\n"
	if err := os.WriteFile(f, []byte(stack), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "render", "-f", f)
	if code == 0 || !strings.Contains(errOut, "spec.ports[0].ipv4.from") || !strings.Contains(errOut, "from: Pool") {
		t.Errorf("exit %d, want the refusal at spec.ports[0].ipv4.from naming from: Pool: %s", code, errOut)
	}
}

// The lab sample of two processes on the local cluster's one CPU: without --cpus the
// placeholders have the one CPU the injection asks for, and --eal shows both lcores on it.
func TestRenderShowsLcoresSharingACPU(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "local-cluster/stack-two-processes.yaml"), "--eal")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"lcore_mask=80000000000000000000000000000002",
		"# eal proc 0: f-stack --lcores=1@1 -n4 --proc-type=primary", "# eal proc 1: f-stack --lcores=127@1 -n4 --proc-type=secondary",
		"# fstack env (lab: lcores share CPUs): KUBE_FSTACK_LCORE_CPUS=1,1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := fstackini.Parse([]byte(out), fstackini.V125); err != nil {
		t.Errorf("output with --eal must stay a config F-Stack reads: %v", err)
	}
}

func TestRenderVhostFlagAndNotes(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "vhost-user.yaml"), "--cpus", "2-3", "--vhost", "data=/x/net1.sock")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "path=/x/net1.sock") {
		t.Errorf("--vhost ignored:\n%s", out)
	}
	out, errOut, _ = run(t, "render", "-f", sample(t, "vhost-user.yaml"))
	if !strings.Contains(errOut, "no --cpus") || !strings.Contains(errOut, "socket path") || !strings.Contains(out, "[vdev0]") {
		t.Errorf("placeholders must be announced on stderr; got %q", errOut)
	}
}

func TestRenderInvalidPrintsEveryFieldPath(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: bad}
spec:
  processes: 4
  ports:
  - name: a
    device: {pci: {address: "0000:01:00.0"}}
    ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.300}
  freebsd: {tcbHashSize: 1000}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "render", "-f", bad, "--cpus", "2-3")
	if code != 1 || out != "" {
		t.Fatalf("want exit 1 and no stdout, got %d and %q", code, out)
	}
	for _, want := range []string{"spec.processes", "spec.ports[0].ipv4.gateway", "spec.freebsd.tcbHashSize"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %s:\n%s", want, errOut)
		}
	}
}

func TestRenderRejectsUnknownFields(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: t}\nspec:\n  proceses: 2\n  ports: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "render", "-f", bad)
	if code != 1 || !strings.Contains(errOut, "proceses") {
		t.Errorf("a typo must be an error naming the field, got %d %q", code, errOut)
	}
}

// A stack whose processes are a program linked with libfstack says how they are started.
func TestRenderShowsTheProgramMode(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "fstack-nginx.yaml"), "--cpus", "2-3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := `# program Nginx: F-Stack's Nginx master, <nginx> -c <nginx.conf>, with -g "worker_processes 2; fstack_conf /etc/f-stack/config.ini; daemon off; user root;"`; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if _, err := fstackini.Parse([]byte(out), fstackini.V125); err != nil {
		t.Errorf("the program lines must keep the output a config F-Stack reads: %v", err)
	}
	stack := filepath.Join(t.TempDir(), "pp.yaml")
	raw, _ := os.ReadFile(sample(t, "fstack-nginx.yaml"))
	if err := os.WriteFile(stack, []byte(strings.Replace(string(raw), "mode: Nginx", "mode: PerProcess", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run(t, "render", "-f", stack, "--cpus", "2-3")
	if want := "# program PerProcess: process 1 is <command> <args> --conf /etc/f-stack/config.ini --proc-type=secondary --proc-id=1"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// --cpus with more CPUs than the pod's dataplane container has is refused, naming the flag, the
// count and spec.processes: the renderer would silently use the first ones. With cpuPolicy
// Shared (the cpuset is the node's shared pool) it is a note saying which CPUs are used.
func TestRenderRefusesMoreCPUsThanProcesses(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "nginx-shim.yaml"), "--cpus", "8-15")
	if code == 0 || out != "" {
		t.Fatalf("want a refusal without output, got exit %d:\n%s", code, out)
	}
	for _, want := range []string{"--cpus 8-15 gives 8 CPUs", "has exactly 4", "spec.processes is 4", "--cpus 8-11"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	out, errOut, code = run(t, "render", "-f", sample(t, "local-cluster/stack.yaml"), "--cpus", "0-7")
	if code != 0 || !strings.Contains(errOut, "cpuPolicy Shared") || !strings.Contains(out, "lcore_mask=") {
		t.Fatalf("a Shared stack's pool of CPUs must render with a note, got exit %d: %s", code, errOut)
	}
}

// The local cluster's stack (cpuPolicy Shared) on the lab node's shared pool, CPUs 0-1 for both
// containers: the lcore takes CPU 1 and the app CPU 0, as the dataplane and the launcher place
// them. Before, both took CPU 0 and render refused what the runtime then ran.
func TestRenderPlacesSharedLcoresOffTheApp(t *testing.T) {
	out, errOut, code := run(t, "render", "-f", sample(t, "local-cluster/stack.yaml"), "--cpus", "0-1", "--app-cpus", "0-1",
		"--addr", "data=10.99.0.10/24,10.99.0.1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "lcore_mask=2\n") {
		t.Errorf("the lcore is not on CPU 1 (lcore_mask=2):\n%s", out)
	}
	if !strings.Contains(errOut, "its highest CPUs 1 (the app takes the others first)") {
		t.Errorf("the note does not say where the lcore went:\n%s", errOut)
	}
}
