package envtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

// `kubectl fstack bug-report` against the API server: a StackInstance, a pod injected as the
// webhook injects it (with its status token), an event quoting the token and an operator
// Deployment with a secret variable. No kubelet runs and no supervisor answers behind the pod's
// address, so its /status, /config and logs cannot be read: the report says so, each with the API
// server's reason, and is written all the same (exit status 0). Nothing secret is in it.
func TestCLIBugReport(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "reported")
	testenv.CreateIfAbsent(t, k8s, si)
	testenv.DeleteAtEnd(t, k8s, si) // doctor's tests count the namespace's stacks
	pod := statusPod(t, "reported-0", si.Name, "bug-report-node", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true, 0)
	token := inject.StatusToken(pod)
	if token == "" {
		t.Fatal("the injected pod has no status token")
	}
	// The pod's address is this machine's, where no supervisor listens: the pod proxy's dial fails.
	ip := hostAddress(t)
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: "reported-0.token"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: optedInNS, Name: pod.Name, UID: pod.UID},
		Reason:         "Probe", Message: "the probe sent " + podcontract.StatusTokenHeader + ": " + token, Type: corev1.EventTypeWarning}
	secret := "operator-secret-value-7c4f"
	dep := operatorDeployment("bug-report-operator", secret)
	for _, o := range []client.Object{event, dep} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}

	kubeconfig := writeKubeconfig(t)
	out := filepath.Join(t.TempDir(), "report.tar.gz")
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"bug-report", "--kubeconfig", kubeconfig, "-n", optedInNS, si.Name, "--output", out}, &stdout, &stderr)
	t.Logf("kubectl fstack bug-report:\n%s%s", stdout.String(), stderr.String())
	if code != 0 || stdout.String() != out+"\n" {
		t.Fatalf("exit %d, stdout %q: want 0 and the archive's path", code, stdout.String())
	}
	raw, files, ix := readArchive(t, out)
	for _, s := range []string{token, secret} {
		if bytes.Contains(raw, []byte(s)) || bytes.Contains(tarBytes(t, raw), []byte(s)) {
			t.Errorf("the archive holds the secret %q", s)
		}
	}
	dir := "stacks/web/reported/pods/reported-0/"
	for _, want := range []string{"README.md", "index.json", "version.json", "doctor.json", "images.txt", "cluster/server-version.json",
		"cluster/datanetworks.yaml", "stacks/web/reported/stackinstance.yaml", "stacks/web/reported/status.yaml", "stacks/web/reported/conditions.txt",
		dir + "pod.yaml", dir + "events.yaml", "operator/plain/bug-report-operator/deployment.yaml", "operator/plain/addressclaims.yaml"} {
		if files[want] == nil {
			t.Errorf("the archive lacks %s", want)
		}
	}
	checkIndexed(t, files, ix)
	for _, want := range []string{"name: " + podcontract.EnvStatusToken + "\n      value: REDACTED", podcontract.StatusTokenHeader + ": REDACTED"} {
		if !bytes.Contains(append(files[dir+"pod.yaml"], files[dir+"events.yaml"]...), []byte(want)) {
			t.Errorf("the pod or its events lack %q", want)
		}
	}
	checkProxyFailure(t, ix, dir, &stderr)
}

// operatorDeployment is an operator Deployment as the chart labels it, in the plain namespace,
// with a secret variable.
func operatorDeployment(name, secret string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/part-of": "kube-fstack", "app.kubernetes.io/component": "operator"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plainNS, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "operator", Image: "example/kube-fstack-operator:v0.3.0", Env: []corev1.EnvVar{{Name: "WEBHOOK_SECRET", Value: secret}}}}}}}}
}

// checkIndexed: the index lists every file of the archive, with its size, and no other.
func checkIndexed(t *testing.T, files map[string][]byte, ix cli.BugReportIndex) {
	t.Helper()
	listed := map[string]bool{"README.md": true, "index.json": true}
	for _, f := range ix.Files {
		listed[f.Path] = true
		if got, ok := files[f.Path]; !ok || int64(len(got)) != f.Bytes {
			t.Errorf("index.json lists %s (%d bytes), the archive has %d", f.Path, f.Bytes, len(got))
		}
		if !strings.Contains(string(files["README.md"]), "| "+f.Path+" |") {
			t.Errorf("README.md does not list %s", f.Path)
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("%s is in the archive, not in the index", name)
		}
	}
}

// checkProxyFailure: the pod's /status, /config and logs are listed as not collected, each with
// the reason the API server gave, and the summary on stderr counts them.
func checkProxyFailure(t *testing.T, ix cli.BugReportIndex, dir string, stderr *bytes.Buffer) {
	t.Helper()
	missing := map[string]string{}
	for _, m := range ix.Missing {
		missing[m.Path] = m.Reason
	}
	// The dial is refused, unless another process holds the port (then it refuses the token).
	proxied := func(r string) bool {
		return strings.Contains(r, "could not reach the pod's port") || strings.Contains(r, "not answered") || strings.Contains(r, "refused")
	}
	for path, ok := range map[string]func(string) bool{
		dir + "supervisor-status.json":    proxied,
		dir + "supervisor-config.json":    proxied,
		dir + "logs/fstack-dataplane.log": func(r string) bool { return r != "" },
		dir + "logs/nginx.log":            func(r string) bool { return strings.Contains(r, "has no status yet") },
	} {
		if r, found := missing[path]; !found || !ok(r) {
			t.Errorf("not collected: %s: %v, reason %q", path, found, r)
		}
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("; %d items could not be collected", len(ix.Missing))) {
		t.Errorf("the summary does not count the %d items not collected", len(ix.Missing))
	}
}

// A user who may read the stack and its pods but nothing of the cluster (nodes, the operator,
// DataNetworks, events) still gets an archive, exit status 0, each refusal listed.
func TestCLIBugReportForbidden(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "sriov", "reported-rbac")
	other := stack(t, "vhost-user", "reported") // completed below
	for _, s := range []*fsv1.StackInstance{si, other} {
		testenv.CreateIfAbsent(t, k8s, s)
		testenv.DeleteAtEnd(t, k8s, s)
	}
	const user = "bug-reporter"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"kubefstack.io"}, Resources: []string{"stackinstances"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	kubeconfig := writeKubeconfig(t)
	out := filepath.Join(t.TempDir(), "report.tar.gz")
	var ix cli.BugReportIndex
	testenv.Eventually(t, 20*time.Second, func() error {
		var stdout, stderr bytes.Buffer
		if code := cli.Run([]string{"bug-report", "--kubeconfig", kubeconfig, "--as", user, "--output", out, si.Name}, &stdout, &stderr); code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr.String())
		}
		_, files, got := readArchive(t, out)
		if files["stacks/web/reported-rbac/stackinstance.yaml"] == nil {
			return errors.New("the StackInstance is not collected yet") // RBAC caches take a moment
		}
		ix = got
		return nil
	})
	forbidden := map[string]bool{}
	for _, m := range ix.Missing {
		if strings.Contains(m.Reason, "forbidden") {
			forbidden[m.Path] = true
		}
	}
	for _, path := range []string{"operator", "cluster/nodes", "cluster/datanetworks.yaml", "doctor.json", "stacks/web/reported-rbac/events.yaml"} {
		if !forbidden[path] {
			t.Errorf("%s is not listed as forbidden: %+v", path, ix.Missing)
		}
	}
	if got := runCLI(t, "__complete", "bug-report", "--kubeconfig", kubeconfig, "-n", optedInNS, si.Name, "reported"); strings.Contains(got, "reported-rbac\n") ||
		!strings.Contains(got, "reported\n") {
		t.Errorf("bug-report STACK... completes the stacks not given yet: %q", got)
	}
}

// readArchive reads the archive at path: its bytes, its files by path under the root folder,
// its index.
func readArchive(t *testing.T, path string) ([]byte, map[string][]byte, cli.BugReportIndex) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(tarBytes(t, raw)))
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, name, _ := strings.Cut(h.Name, "/")
		if !strings.HasPrefix(h.Name, "kube-fstack-bug-report-") {
			t.Errorf("%s is not under the archive's root folder", h.Name)
		}
		if files[name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	var ix cli.BugReportIndex
	if err := json.Unmarshal(files["index.json"], &ix); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	return raw, files, ix
}

func tarBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
