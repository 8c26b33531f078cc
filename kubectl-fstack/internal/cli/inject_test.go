package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/golden"
)

func TestInjectWorkloadMatchesGolden(t *testing.T) {
	out, errOut, code := run(t, "inject", "-f", sample(t, "workloads/nginx-vhost.yaml"), "--stack", sample(t, "vhost-user.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden.Compare(t, filepath.Join("testdata", "inject-nginx-vhost.yaml"), []byte(out))
	if !strings.Contains(out, "kind: Service") {
		t.Fatal("the Service document was dropped; other kinds must pass through")
	}
}

// The F-Stack Nginx sample injects as it is: its one container becomes the dataplane under the
// supervisor in Nginx mode, keeping the nginx.conf and TLS mounts HTTP/3 needs.
func TestInjectFStackNginxSampleMatchesGolden(t *testing.T) {
	out, errOut, code := run(t, "inject", "-f", sample(t, "workloads/fstack-nginx.yaml"), "--stack", sample(t, "fstack-nginx.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden.Compare(t, filepath.Join("testdata", "inject-fstack-nginx.yaml"), []byte(out))
	for _, want := range []string{"- --native=Nginx", "name: fstack-dataplane", "mountPath: /etc/nginx/tls", "secretName: fstack-nginx-tls"} {
		if !strings.Contains(out, want) {
			t.Errorf("the injected sample lacks %q", want)
		}
	}
}

// The offline CLI gives exactly what the webhook's pure function gives.
func TestInjectPodEqualsThePackage(t *testing.T) {
	in := fixtures.Path(t, "pods/nginx-vhost.yaml")
	out, errOut, code := run(t, "inject", "-f", in, "--stack", sample(t, "vhost-user.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(out), got); err != nil {
		t.Fatal(err)
	}
	pod := fixtures.LoadPod(t, "nginx-vhost")
	cfg := inject.DefaultConfig()
	cfg.ImagePullPolicy = corev1.PullIfNotPresent
	cfg.OmitStatusToken = true // the webhook gives each pod its own
	want, _, err := inject.Inject(pod, fixtures.Stack(t, "vhost-user"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Fatalf("CLI and package differ:\n%s", diff)
	}
}

func TestInjectRefusalNamesTemplateFields(t *testing.T) {
	dir := t.TempDir()
	raw := fixtures.MustRead(t, "samples/workloads/nginx-vhost.yaml")
	const command = `command: [nginx, -c, /etc/nginx/kube-fstack/nginx.conf]`
	if !strings.Contains(string(raw), command) {
		t.Fatalf("the sample's command moved; this test removes %q", command)
	}
	broken := strings.Replace(string(raw), command, "", 1)
	path := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "inject", "-f", path, "--stack", sample(t, "vhost-user.yaml"))
	if code != 1 || out != "" {
		t.Fatalf("exit %d with output %q; want 1 and nothing on stdout", code, out)
	}
	for _, want := range []string{"Deployment nginx-fstack cannot run StackInstance \"vhost-user\"", "spec.template.spec.containers[0].command: Required value"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr %q lacks %q", errOut, want)
		}
	}
}

func TestInjectInvalidStack(t *testing.T) {
	_, errOut, code := run(t, "inject", "-f", sample(t, "workloads/nginx-vhost.yaml"), "--stack", fixtures.Path(t, "stacks/broken.yaml"))
	if code != 1 || !strings.Contains(errOut, "spec.ports[1].device.pci: Duplicate value") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// The audit's exploit (issue 12): a pod whose app mounts fstack-vhost, the node's whole socket
// root, is refused with the mount's field path, and nothing is printed for kubectl to apply.
func TestInjectRefusesMountOfTheSocketRoot(t *testing.T) {
	in := fixtures.Path(t, "pods/mounts-socket-root.yaml")
	out, errOut, code := run(t, "inject", "-f", in, "--stack", sample(t, "vhost-user.yaml"))
	if code == 0 || out != "" {
		t.Fatalf("exit %d with output %q; want non-zero and nothing on stdout", code, out)
	}
	for _, want := range []string{"spec.containers[0].volumeMounts[1].name: Forbidden", "fstack-vhost", "remove this mount"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr %q lacks %q", errOut, want)
		}
	}
}

// --node-affinity=false leaves the pod's scheduling as it was, for clusters without the node agent.
func TestInjectWithoutNodeAffinity(t *testing.T) {
	in := fixtures.Path(t, "pods/nginx-vhost.yaml")
	with, errOut, code := run(t, "inject", "-f", in, "--stack", sample(t, "vhost-user.yaml"))
	if code != 0 || !strings.Contains(with, "node.kubefstack.io/vhost-user") {
		t.Fatalf("exit %d (%s): default injection lacks the vhost-user node requirement", code, errOut)
	}
	without, errOut, code := run(t, "inject", "-f", in, "--stack", sample(t, "vhost-user.yaml"), "--node-affinity=false")
	if code != 0 || strings.Contains(without, "affinity") {
		t.Fatalf("exit %d (%s): --node-affinity=false still has an affinity:\n%s", code, errOut, without)
	}
}

// inject refuses what the webhook would not inject, naming both sides, and injects each item of
// a List (what kubectl get -o yaml writes) rather than passing it through.
func TestInjectListsNamespacesAndForeignLabels(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stack := strings.Replace(string(fixtures.MustRead(t, "samples/vhost-user.yaml")), "  name: vhost-user\n", "  name: vhost-user\n  namespace: web\n", 1)
	stackFile := write("stack.yaml", stack)
	pod := func(ns, label string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: " + ns + "\n  labels: {" + label + "}\nspec:\n  containers: [{name: app, image: nginx, command: [nginx], resources: {limits: {cpu: '1', memory: 1Gi}}}]\n"
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(pod("web", ""), "\n"), "\n", "\n  ") + "\n"
	out, errOut, code := run(t, "inject", "--stack", stackFile, "-f", write("list.yaml", list))
	if code != 0 || !strings.Contains(out, "kind: List") || !strings.Contains(out, "name: fstack-dataplane") {
		t.Errorf("List: exit %d, its pod not injected:\n%s\n%s", code, out, errOut)
	}
	for name, tc := range map[string]struct{ file, want string }{
		"other namespace": {pod("other", ""), `metadata.namespace is "other" but StackInstance vhost-user is in "web"`},
		"foreign label":   {pod("web", "kubefstack.io/stack: mine"), "metadata.labels labels kubefstack.io/stack=mine, but --stack is StackInstance vhost-user"},
		"in a List":       {"apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(pod("other", ""), "\n"), "\n", "\n  ") + "\n", `items[0] (Pod p): metadata.namespace is "other"`},
	} {
		out, errOut, code := run(t, "inject", "--stack", stackFile, "-f", write(strings.ReplaceAll(name, " ", "-")+".yaml", tc.file))
		if code == 0 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr lacks %q:\n%s%s", name, code, tc.want, out, errOut)
		}
	}
}

// The quickstart's stack takes its address from a pool, which only the webhook claims: offline the
// workload is injected as a preview, each pod with the pool's first address, and both the output
// (a comment above the document) and stderr say it is a placeholder not to apply.
func TestInjectQuickstartPoolPreviewMatchesGolden(t *testing.T) {
	out, errOut, code := run(t, "inject", "-f", sample(t, "quickstart/nginx.yaml"), "--stack", sample(t, "quickstart/stack.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden.Compare(t, filepath.Join("testdata", "inject-quickstart.yaml"), []byte(out))
	for _, want := range []string{
		"warning: StackInstance quickstart gives each pod its own address from a pool",
		"placeholder (spec.ports[0].ipv4 10.56.0.10)",
		"do not apply it to a cluster that runs kube-fstack",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	for _, want := range []string{
		"# kubectl fstack inject: a preview. StackInstance quickstart",
		"kubefstack.io/addresses: 0:data=10.56.0.10\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Count(out, "# kubectl fstack inject: a preview") != 1 {
		t.Error("the preview comment is not on the Deployment alone (the ConfigMap has no pod)")
	}
}

// A static stack is injected as before: no placeholder, nothing said.
func TestInjectStaticStackSaysNoPreview(t *testing.T) {
	out, errOut, code := run(t, "inject", "-f", sample(t, "workloads/nginx-vhost.yaml"), "--stack", sample(t, "vhost-user.yaml"))
	if code != 0 || errOut != "" || strings.Contains(out, "a preview") {
		t.Fatalf("exit %d, stderr %q, preview comment %v", code, errOut, strings.Contains(out, "a preview"))
	}
}
