package cli

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
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The secrets of the fake cluster: the pod's status token, a variable and a flag that name a
// secret, the operator's, and the user's bearer token from the kubeconfig. None may be in the
// archive, in any form.
const (
	podToken      = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dbPassword    = "hunter2hunter2"
	apiToken      = "app-api-token-998877"
	webhookSecret = "operator-webhook-secret-42"
	userBearer    = "user-bearer-token-from-kubeconfig"
)

// bugReportCluster is a fake API server holding objs (controller-runtime's fake client), which
// answers an events list by involvedObject.uid as the API server's field selector does.
func bugReportCluster(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := fsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}).Build()
}

// bugReportObjects are a stack of namespace web with a running pod (its dataplane restarted
// once, so it has a previous log) and a pending one; an operator Deployment with its pod; a
// node with its agent's report; a DataNetwork and an AddressClaim; events.
func bugReportObjects(t *testing.T) []client.Object {
	si := namedStack(t, "vhost-user", "web", "edge")
	si.UID = "uid-edge"
	si.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "PodsNotReady", Message: "0/1 pods ready",
		LastTransitionTime: metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))}}
	running := func(name string, restarts int32) corev1.ContainerStatus {
		s := corev1.ContainerStatus{Name: name, Image: "img/" + name, ImageID: "sha256:" + name, RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if restarts > 0 {
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
		}
		return s
	}
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "edge-0", UID: "uid-edge-0",
		Labels:        map[string]string{fsv1.StackLabel: "edge"},
		Annotations:   map[string]string{lastApplied: `{"env":[{"name":"` + podcontract.EnvStatusToken + `","value":"` + podToken + `"}]}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-fstack-operator", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}}},
		Spec: corev1.PodSpec{NodeName: "node-a",
			InitContainers: []corev1.Container{{Name: podcontract.DataplaneContainer, Image: "img/dataplane", RestartPolicy: &always,
				Env: []corev1.EnvVar{{Name: podcontract.EnvStatusToken, Value: podToken}, {Name: "FSTACK_PROCS", Value: "2"}}}},
			Containers: []corev1.Container{{Name: "nginx", Image: "img/nginx", Args: []string{"--api-token=" + apiToken, "--listen=:80"},
				Env: []corev1.EnvVar{{Name: "DB_PASSWORD", Value: dbPassword}, {Name: "DB_HOST", Value: "db.web"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			InitContainerStatuses: []corev1.ContainerStatus{running(podcontract.DataplaneContainer, 1)},
			ContainerStatuses:     []corev1.ContainerStatus{running("nginx", 0)}}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "edge-1", UID: "uid-edge-1", Labels: map[string]string{fsv1.StackLabel: "edge"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "img/nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	labels := map[string]string{"app.kubernetes.io/part-of": "kube-fstack", "app.kubernetes.io/component": "operator"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-fstack", Name: "kube-fstack-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "img/operator:v1",
				Args: []string{"--dataplane-image=img/dataplane:v1"}, Env: []corev1.EnvVar{{Name: "WEBHOOK_SECRET", Value: webhookSecret}}}}}}}}
	opPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-fstack", Name: "kube-fstack-operator-abc", UID: "uid-op", Labels: labels},
		Spec:   dep.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("operator", 0)}}}
	report := &nodecheck.Report{Checks: []nodecheck.Check{{Name: "hugepages-2Mi", Status: nodecheck.Pass, Detail: "1024 total, 900 free"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{fsv1.NodeReportAnnotation: report.Marshal()}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"img/huge"}}}}}
	return []client.Object{&si, pod, pending, dep, opPod, node,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "edge-fstack"}, Data: map[string]string{"config.ini": "[dpdk]\n"}},
		&fsv1.DataNetwork{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: fsv1.DataNetworkSpec{Subnets: []string{"10.56.0.0/24"}}},
		&fsv1.AddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-fstack", Name: "default-10.56.0.10"}, Spec: fsv1.AddressClaimSpec{StackInstance: "edge", Address: "10.56.0.10", Port: "data"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "edge-0.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "edge-0", UID: "uid-edge-0"},
			Reason: "DataplaneUnhealthy", Message: "probe with token " + podToken + " refused"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "edge.1"}, InvolvedObject: corev1.ObjectReference{Kind: "StackInstance", Name: "edge", UID: "uid-edge"},
			Reason: "Valid", Message: "the spec is valid"},
	}
}

// fakeSupervisors answers /status for edge-0, and /config for nobody: the proxy could not reach it.
type fakeSupervisors struct{}

func (fakeSupervisors) readStatus(_ context.Context, p *corev1.Pod) (*podcontract.DataplaneStatus, error) {
	if p.Name == "edge-0" {
		return &podcontract.DataplaneStatus{Generation: 2, Ready: true, Reason: "ready"}, nil
	}
	return nil, &statusError{statusUnreachable, errors.New("HTTP 503: no route")}
}

func (fakeSupervisors) readConfig(context.Context, *corev1.Pod) (*podcontract.RunningConfig, error) {
	return nil, &statusError{statusUnreachable, errors.New("HTTP 503: no route to host")}
}

// fakeLogs serves each container's log as the kubelet does: the last TailLines lines, then
// LimitBytes of them. The dataplane's log quotes every secret in the forms a log could.
type fakeLogs struct{ lines int }

func (f fakeLogs) readLog(_ context.Context, _, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	if pod == "edge-0" && o.Container == "nginx" && o.Previous {
		return nil, errors.New("previous terminated container \"nginx\" in pod \"edge-0\" not found")
	}
	var lines []string
	for i := range f.lines {
		lines = append(lines, fmt.Sprintf("%s %s line %d previous=%v", pod, o.Container, i, o.Previous))
	}
	if o.Container == podcontract.DataplaneContainer {
		lines = append(lines, "GET /status "+podcontract.StatusTokenHeader+": "+podToken,
			"header map["+podcontract.StatusTokenHeader+":["+podToken+"]]",
			"env "+podcontract.EnvStatusToken+"="+podToken+" DB_PASSWORD="+dbPassword,
			"token again: "+podToken, "Authorization: Bearer "+userBearer, "kubeconfig token "+userBearer, "API_KEY=short")
	}
	if o.TailLines != nil && int64(len(lines)) > *o.TailLines {
		lines = lines[int64(len(lines))-*o.TailLines:]
	}
	b := []byte(strings.Join(lines, "\n") + "\n")
	if o.LimitBytes != nil && int64(len(b)) > *o.LimitBytes {
		b = b[:*o.LimitBytes]
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func fakeSources(c client.Client, logLines int) *reportSources {
	return &reportSources{client: c, status: fakeSupervisors{}, config: fakeSupervisors{}, logs: fakeLogs{lines: logLines},
		version: func(context.Context) (*version.Info, error) { return &version.Info{GitVersion: "v1.35.4"}, nil },
		secrets: []string{userBearer}}
}

// bugReport runs the report into a temporary folder with limits, and returns the archive's
// gzipped bytes, its files by path under the root folder, and its index.
func bugReport(t *testing.T, src *reportSources, scope reportScope, limits BugReportLimits) ([]byte, map[string][]byte, BugReportIndex, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.tar.gz")
	o := &bugReportOptions{output: out, limits: limits, now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }}
	var stderr bytes.Buffer
	got, err := o.report(context.Background(), src, scope, &stderr)
	if err != nil || got != out {
		t.Fatalf("report: %q, %v\n%s", got, err, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, raw)
	var ix BugReportIndex
	if err := json.Unmarshal(files["index.json"], &ix); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	return raw, files, ix, stderr.String()
}

// untar reads a gzipped tar whose every entry is under kube-fstack-bug-report-20250102T030405Z/.
func untar(t *testing.T, raw []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name, ok := strings.CutPrefix(h.Name, "kube-fstack-bug-report-20250102T030405Z/")
		if !ok || h.Typeflag != tar.TypeReg || h.Mode != 0o644 {
			t.Errorf("entry %s (type %c, mode %o): every entry is a file under the root folder", h.Name, h.Typeflag, h.Mode)
		}
		if files[name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func testLimits() BugReportLimits {
	return BugReportLimits{LogLines: 100, FileBytes: 2 << 20, TotalBytes: 100 << 20}
}

// What a maintainer asks for first is in the archive, every file listed in the index, and every
// item that could not be collected listed with its reason.
func TestBugReportCollects(t *testing.T) {
	_, files, ix, stderr := bugReport(t, fakeSources(bugReportCluster(t, bugReportObjects(t)...), 150),
		reportScope{namespace: "web"}, testLimits())
	for _, want := range []string{"README.md", "index.json", "version.json", "doctor.json", "images.txt",
		"cluster/server-version.json", "cluster/datanetworks.yaml", "cluster/nodes/node-a.yaml", "cluster/nodes/node-a.report.json",
		"operator/kube-fstack/kube-fstack-operator/deployment.yaml", "operator/kube-fstack/addressclaims.yaml",
		"operator/kube-fstack/kube-fstack-operator/pods/kube-fstack-operator-abc/pod.yaml",
		"operator/kube-fstack/kube-fstack-operator/pods/kube-fstack-operator-abc/logs/operator.log",
		"stacks/web/edge/stackinstance.yaml", "stacks/web/edge/conditions.txt", "stacks/web/edge/status.yaml",
		"stacks/web/edge/events.yaml", "stacks/web/edge/configmap.yaml",
		"stacks/web/edge/pods/edge-0/pod.yaml", "stacks/web/edge/pods/edge-0/events.yaml", "stacks/web/edge/pods/edge-0/supervisor-status.json",
		"stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log", "stacks/web/edge/pods/edge-0/logs/fstack-dataplane.previous.log",
		"stacks/web/edge/pods/edge-0/logs/nginx.log", "stacks/web/edge/pods/edge-1/pod.yaml"} {
		if files[want] == nil {
			t.Errorf("the archive lacks %s", want)
		}
	}
	listed := map[string]bool{"README.md": true, "index.json": true}
	for _, f := range ix.Files {
		listed[f.Path] = true
		if int64(len(files[f.Path])) != f.Bytes {
			t.Errorf("index: %s has %d bytes, the archive %d", f.Path, f.Bytes, len(files[f.Path]))
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("%s is in the archive but not in the index", name)
		}
	}
	missing := map[string]string{}
	for _, m := range ix.Missing {
		missing[m.Path] = m.Reason
	}
	for path, reason := range map[string]string{
		"stacks/web/edge/pods/edge-0/supervisor-config.json":       "pod web/edge-0: /config not answered",
		"stacks/web/edge/pods/edge-1/supervisor-status.json":       "the pod is Pending: only a running pod's supervisor answers",
		"stacks/web/edge/pods/edge-1/logs/nginx.log":               "the container has no status yet (pod Pending): it has not started",
		"stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log.gz": "-",
	} {
		got, ok := missing[path]
		switch {
		case reason == "-" && ok, reason != "-" && !ok:
			t.Errorf("missing %s: %v (%q)", path, ok, got)
		case reason != "-" && !strings.Contains(got, reason):
			t.Errorf("missing %s: reason %q, want %q", path, got, reason)
		}
	}
	if _, ok := missing["stacks/web/edge/pods/edge-0/logs/nginx.previous.log"]; ok {
		t.Errorf("nginx never restarted: no previous log is asked for")
	}
	bugReportContent(t, files, ix)
	if !strings.Contains(stderr, fmt.Sprintf("; %d items could not be collected", len(ix.Missing))) ||
		!strings.Contains(stderr, "warning: not collected: pod web/edge-0: its supervisor's /config") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// bugReportContent checks what some files say: the log's bounds, the status view, doctor's
// report, the versions, the redacted objects.
func bugReportContent(t *testing.T, files map[string][]byte, ix BugReportIndex) {
	t.Helper()
	for _, f := range ix.Files {
		if f.Path == "stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log" && f.Truncated != "its last 100 lines (--max-log-lines)" {
			t.Errorf("the dataplane's log: truncated %q", f.Truncated)
		}
	}
	if n := bytes.Count(files["stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log"], []byte("\n")); n != 100 {
		t.Errorf("the dataplane's log has %d lines, want its last 100", n)
	}
	for name, re := range map[string]string{
		"stacks/web/edge/status.yaml":        `(?s)name: edge-0\n.*\nkind: StackStatusList\n`,
		"stacks/web/edge/conditions.txt":     `TYPE +STATUS +REASON +SINCE +GENERATION +MESSAGE\nReady +False +PodsNotReady +2025-01-02T03:04:05Z +0 +0/1 pods ready\n`,
		"stacks/web/edge/events.yaml":        `(?s)message: the spec is valid\n.*\nkind: EventList\n`,
		"doctor.json":                        `"kind": "DoctorReport"`,
		"version.json":                       `"image": "img/operator:v1"(.|\n)*"dataplaneImage": "img/dataplane:v1"`,
		"cluster/server-version.json":        `"gitVersion": "v1.35.4"`,
		"images.txt":                         `\nweb +edge-0 +fstack-dataplane +img/dataplane +sha256:fstack-dataplane\n`,
		"cluster/nodes/node-a.yaml":          `kind: Node\n`,
		"stacks/web/edge/stackinstance.yaml": `apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\n`,
		"README.md":                          `the tokens that follow .Bearer.(.|\n)*\| stacks/web/edge/pods/edge-0/supervisor-config\.json \| .*/config not answered`,
	} {
		if !regexp.MustCompile(re).Match(files[name]) {
			t.Errorf("%s does not match %q:\n%s", name, re, files[name])
		}
	}
	pod := string(files["stacks/web/edge/pods/edge-0/pod.yaml"])
	for _, want := range []string{"name: " + podcontract.EnvStatusToken + "\n      value: REDACTED", "name: DB_PASSWORD\n      value: REDACTED",
		"name: DB_HOST\n      value: db.web", "--api-token=REDACTED", "--listen=:80", lastApplied + ": REDACTED"} {
		if !strings.Contains(pod, want) {
			t.Errorf("pod.yaml lacks %q:\n%s", want, pod)
		}
	}
	if strings.Contains(pod, "managedFields") || strings.Contains(string(files["cluster/nodes/node-a.yaml"]), "img/huge") {
		t.Errorf("managedFields, or the node's images, kept")
	}
	if !regexp.MustCompile(`name: WEBHOOK_SECRET\n +value: REDACTED\n`).Match(files["operator/kube-fstack/kube-fstack-operator/deployment.yaml"]) {
		t.Errorf("the operator's secret variable is not redacted:\n%s", files["operator/kube-fstack/kube-fstack-operator/deployment.yaml"])
	}
}

// The archive is meant for a public issue: no secret of the cluster or the user is anywhere in
// its bytes, compressed or not, whatever file it was copied to (the pod, its last-applied
// annotation, an event, a log line with the header, Go's printed http.Header, the environment).
func TestBugReportHoldsNoSecret(t *testing.T) {
	raw, files, _, _ := bugReport(t, fakeSources(bugReportCluster(t, bugReportObjects(t)...), 3), reportScope{namespace: "web"}, testLimits())
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tarBytes, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{podToken, podToken[:32], dbPassword, apiToken, webhookSecret, userBearer, "API_KEY=short"} {
		if bytes.Contains(raw, []byte(secret)) || bytes.Contains(tarBytes, []byte(secret)) {
			t.Errorf("the archive holds %q", secret)
		}
	}
	log := string(files["stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log"])
	for _, want := range []string{podcontract.StatusTokenHeader + ": REDACTED", podcontract.EnvStatusToken + "=REDACTED DB_PASSWORD=REDACTED",
		"token again: REDACTED", "Authorization: Bearer REDACTED", "API_KEY=REDACTED"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// The archive stays within --max-size, a log within --max-file-size keeps its newest lines, and
// the files that do not fit are listed with the reason.
func TestBugReportBounds(t *testing.T) {
	limits := BugReportLimits{LogLines: 100000, FileBytes: 512 << 10, TotalBytes: 1 << 20}
	raw, files, ix, _ := bugReport(t, fakeSources(bugReportCluster(t, bugReportObjects(t)...), 20000), reportScope{namespace: "web"}, limits)
	if int64(len(raw)) > limits.TotalBytes {
		t.Errorf("the archive has %d bytes, more than --max-size %d", len(raw), limits.TotalBytes)
	}
	var full int
	for _, m := range ix.Missing {
		if strings.Contains(m.Reason, "the archive reached --max-size 1Mi") {
			full++
		}
	}
	dp := files["stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log"]
	if full == 0 || int64(len(dp)) > limits.FileBytes || !bytes.HasSuffix(dp, []byte("API_KEY=REDACTED\n")) {
		t.Errorf("%d items left out for the size, the dataplane's log %d bytes ending %q", full, len(dp), dp[max(0, len(dp)-40):])
	}
	for _, f := range ix.Files {
		if f.Path == "stacks/web/edge/pods/edge-0/logs/fstack-dataplane.log" && !strings.Contains(f.Truncated, "its last 512Ki (--max-file-size)") {
			t.Errorf("the dataplane's log: truncated %q", f.Truncated)
		}
	}
}

// The flags are checked before anything is asked or written, each error naming the flag and
// the fix, exit status 2 (as doctor's could-not-look); no API server, or an output that
// cannot be written, is 1 and leaves no file.
func TestBugReportExitCodes(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	for args, want := range map[string]string{
		"-A edge":                            "name StackInstances or give -A, not both",
		"-l tier=edge edge":                  "name StackInstances or give -l, not both",
		"-l a=(b":                            `-l "a=(b"`,
		"--max-log-lines 0":                  "--max-log-lines 0: give 1 to 2147483647 (default 5000)",
		"--output -":                         "--output -: the archive is not written to stdout",
		"--max-size 2Ei":                     `--max-size "2Ei": give a whole number of bytes from 1Mi to 1Ti, such as 2Mi`,
		"--max-size lots":                    `--max-size "lots": not a size: give bytes or a quantity such as 512Ki, 2Mi, 1Gi`,
		"--max-file-size 100":                `--max-file-size "100": give a whole number of bytes from 1Ki to`,
		"--max-file-size 8Mi --max-size 8Mi": "--max-file-size 8Mi does not fit in --max-size 8Mi",
		"--output " + dir:                    "--output " + dir + " is a folder: name the archive's file, e.g. --output " + dir + "/kube-fstack-bug-report-",
		"--no-such-flag":                     "unknown flag: --no-such-flag",
		"":                                   "kubeconfig",
	} {
		_, errOut, code := run(t, append(append([]string{"bug-report"}, strings.Fields(args)...), "--kubeconfig", none)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("bug-report %s: exit %d, stderr %q; want 2 and %q", args, code, errOut, want)
		}
	}
	dead := kubeconfigFor(t, "https://127.0.0.1:1")
	out := filepath.Join(dir, "report.tar.gz")
	for what, c := range map[string]struct{ output, want string }{
		"no API server":        {out, "the API server did not answer, so nothing was collected and no archive written"},
		"an unwritable output": {filepath.Join(dir, "no", "such", "folder", "r.tar.gz"), "no archive written: --output " + filepath.Join(dir, "no", "such", "folder", "r.tar.gz")},
	} {
		stdout, errOut, code := run(t, "bug-report", "--kubeconfig", dead, "--output", c.output)
		if code != 1 || !strings.Contains(errOut, c.want) || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and %q", what, code, stdout, errOut, c.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a failed report left %v behind", left)
	}
}

// One item that fails never stops the report: a user who may read nothing but the API server's
// version gets an archive (exit status 0) listing every item with the API server's refusal.
func TestBugReportForbiddenStillWrites(t *testing.T) {
	forbidden := func(what string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: what}, "", errors.New("RBAC: access denied"))
	}
	c := fake.NewClientBuilder().WithScheme(bugReportCluster(t).Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, l client.ObjectList, _ ...client.ListOption) error {
			return forbidden(fmt.Sprintf("%T", l))
		},
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, o client.Object, _ ...client.GetOption) error {
			return forbidden(fmt.Sprintf("%T", o))
		},
	}).Build()
	_, files, ix, stderr := bugReport(t, fakeSources(c, 1), reportScope{namespace: "web", names: []string{"edge"}}, testLimits())
	if files["version.json"] == nil || files["README.md"] == nil || len(ix.Missing) < 4 {
		t.Fatalf("files %d, missing %+v", len(files), ix.Missing)
	}
	for _, m := range ix.Missing {
		if !strings.Contains(m.Reason, "forbidden") {
			t.Errorf("%s: %s", m.What, m.Reason)
		}
	}
	if !strings.Contains(string(files["README.md"]), "| StackInstance web/edge | stacks/web/edge | get StackInstance web/edge: *v1alpha1.StackInstance is forbidden") ||
		!strings.Contains(stderr, "warning: not collected: StackInstance web/edge: get StackInstance web/edge: ") {
		t.Errorf("README.md:\n%s\nstderr:\n%s", files["README.md"], stderr)
	}
}

// Interrupted (its context cancelled), the report writes no archive and leaves no temporary file.
func TestBugReportInterrupted(t *testing.T) {
	dir := t.TempDir()
	o := &bugReportOptions{output: filepath.Join(dir, "r.tar.gz"), limits: testLimits(), now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := o.report(ctx, fakeSources(bugReportCluster(t, bugReportObjects(t)...), 1), reportScope{namespace: "web"}, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "interrupted, so no archive written") {
		t.Errorf("report: %v (exit %d)", err, exitCode(err))
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("an interrupted report left %v", left)
	}
}

func TestRedactorFlagsAndScrub(t *testing.T) {
	r := newRedactor()
	env := []corev1.EnvVar{{Name: "my_token", Value: "abcdefghijk"}, {Name: "PLAIN", Value: "abcdefghijk-plain"},
		{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}, {Name: "SHORT_SECRET", Value: "x"}}
	args := []string{"--password", "pw-123456789", "--cert-secret=webhook-certs", "-token=tok-123456789", "--password"}
	r.container(env, args)
	if env[0].Value != redacted || env[1].Value != "abcdefghijk-plain" || env[2].ValueFrom == nil || env[3].Value != redacted {
		t.Errorf("env %+v", env)
	}
	if want := []string{"--password", redacted, "--cert-secret=webhook-certs", "-token=" + redacted, "--password"}; strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("args %q, want %q", args, want)
	}
	got := string(r.scrub([]byte(`x-kubefstack-token="abc_DEF-1" abcdefghijk pw-123456789 tok-123456789 X FOO_SECRET=s3 x=1 "X-Kubefstack-Token": "t0k3n"`)))
	want := `x-kubefstack-token="REDACTED" REDACTED REDACTED REDACTED X FOO_SECRET=REDACTED x=1 "X-Kubefstack-Token": "REDACTED"`
	if got != want {
		t.Errorf("scrub:\n got %s\nwant %s", got, want)
	}
}

func TestTailLog(t *testing.T) {
	limits := BugReportLimits{LogLines: 3, FileBytes: 10}
	for _, c := range []struct {
		in, out, note string
		cut           bool
	}{
		{"a\nb\nc\n", "a\nb\nc\n", "", false},
		{"a\nb\nc\nd\n", "b\nc\nd\n", "its last 3 lines (--max-log-lines)", false},
		{"aaaa\nbbbb\ncc\n", "bbbb\ncc\n", "its last 10 bytes (--max-file-size)", false},
		{"a\nb\n", "a\nb\n", "its last 3 lines are more than 40 bytes: the API server sent their first 40 bytes, so the newest lines are missing", true},
	} {
		out, note := tailLog([]byte(c.in), limits, c.cut)
		if string(out) != c.out || note != c.note {
			t.Errorf("tailLog(%q) = %q, %q; want %q, %q", c.in, out, note, c.out, c.note)
		}
	}
}
