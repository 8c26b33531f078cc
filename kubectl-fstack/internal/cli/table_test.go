package cli

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// tableList is two StackInstances of two namespaces, three pods on two nodes with 10, 9 and 0
// dataplane restarts, and a StackInstance without pods.
func tableList() *StackStatusList {
	pod := func(name, node string, restarts int32) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "fstack-dataplane", RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	}
	si := func(ns, name string) *fsv1.StackInstance {
		return &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	l := newStackStatusList()
	l.addStack(si("web", "a"), []corev1.Pod{pod("a-1", "node-b", 10), pod("a-2", "node-a", 9)}, podStatuses{})
	l.addStack(si("api", "b"), []corev1.Pod{pod("b-1", "node-c", 0)}, podStatuses{})
	l.addStack(si("api", "empty"), nil, podStatuses{})
	return l
}

// column is the cells of column i of a table's rows (columns are 2 or more spaces apart).
func column(t *testing.T, table string, i int) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := regexp.MustCompile(` {2,}`).Split(line, -1)
		if i >= len(f) {
			t.Fatalf("row %q has no column %d", line, i)
		}
		out = append(out, f[i])
	}
	return out
}

// --no-headers prints the rows alone; --sort-by orders them by a JSONPath over each row (the
// stack's fields, the pod's under .pod), numbers as numbers, a row without the field first.
func TestStatusTableNoHeadersAndSortBy(t *testing.T) {
	l := tableList()
	print := func(o statusTable) string {
		var out bytes.Buffer
		if err := l.writeTable(&out, o); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	all := statusTable{withNamespace: true}
	if got := print(all); !strings.HasPrefix(got, "NAMESPACE") {
		t.Errorf("headers missing:\n%s", got)
	}
	all.noHeaders = true
	if got := print(all); strings.Contains(got, "NAMESPACE") || strings.Count(got, "\n") != 4 {
		t.Errorf("--no-headers:\n%s", got)
	}
	for expr, want := range map[string]string{
		"":                        "a-1 a-2 b-1 <none>",
		".pod.node":               "<none> a-2 a-1 b-1",
		"{.pod.node}":             "<none> a-2 a-1 b-1",
		".pod.dataplane.restarts": "<none> b-1 a-2 a-1",
		".namespace":              "b-1 <none> a-1 a-2",
		".pod.name":               "<none> a-1 a-2 b-1",
	} {
		all.sortBy = expr
		if got := strings.Join(column(t, print(all), 3), " "); got != want {
			t.Errorf("--sort-by %q: pods %s, want %s", expr, got, want)
		}
	}
	all.sortBy = ".pod.nosuch"
	if err := l.writeTable(&bytes.Buffer{}, all); err == nil || !strings.Contains(err.Error(), "no row has that field") {
		t.Errorf("--sort-by a field no row has: %v", err)
	}
}

// The flags are checked before the cluster is asked: --sort-by sorts a table, and parses.
func TestStatusTableFlagsRefused(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for args, want := range map[string]string{
		"-o json --sort-by .name": "--sort-by sorts the table's rows",
		"--sort-by {.name":        "--sort-by",
		"-l a=(b":                 `-l "a=(b"`,
		"-l a=b shown":            "name a StackInstance or give -l, not both",
		"--sort-by .name -o yaml": "--sort-by sorts the table's rows",
	} {
		_, errOut, code := run(t, append(append([]string{"status"}, strings.Fields(args)...), "--kubeconfig", none)...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("status %s: exit %d, stderr %q, want %q", args, code, errOut, want)
		}
	}
}

// doctor --sort-by orders the nodes by a JSONPath over each as -o json prints it; a JSONPath
// that does not parse is a wrong invocation (exit status 2), found before the cluster is asked.
func TestDoctorSortByNodes(t *testing.T) {
	nodes := []NodeDoctor{{Name: "node-a", Report: true}, {Name: "node-c"}, {Name: "node-b", Report: true, ReportError: "bad"}}
	if err := sortByPath(nodes, ".reportError"); err != nil {
		t.Fatal(err)
	}
	if got := nodes[0].Name + " " + nodes[1].Name + " " + nodes[2].Name; got != "node-a node-c node-b" {
		t.Errorf("--sort-by .reportError: %s, want the nodes without one first, in their order", got)
	}
	if err := sortByPath(nodes, "{.name}"); err != nil || nodes[0].Name != "node-a" || nodes[2].Name != "node-c" {
		t.Errorf("--sort-by {.name}: %v %+v", err, nodes)
	}
	_, errOut, code := run(t, "doctor", "--sort-by", "{.name", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if code != 2 || !strings.Contains(errOut, "--sort-by") {
		t.Errorf("doctor --sort-by {.name: exit %d, %s", code, errOut)
	}
}

// doctor --no-headers prints each table's rows without its header line (STATUS CHECK ...), as
// status's; the lines that head each part (the node, its labels, the fix lines) stay, and so
// do the rows: the same output but for the headers.
func TestDoctorTableNoHeaders(t *testing.T) {
	in := doctorInput{nodes: []corev1.Node{*demoNode()},
		stacks: []fsv1.StackInstance{namedStack(t, "vhost-user", "web", "demo")},
		pods:   []corev1.Pod{stackPod("web", "demo", "demo")}}
	in.setup.namespaces = map[string]map[string]string{"web": nil}
	r := buildDoctorReport(in)
	print := func(o doctorTable) string {
		var out bytes.Buffer
		if err := r.writeTable(&out, o); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	headers := []string{"\n  STATUS   CHECK             DETAIL                                NEEDED-BY\n", "\n  STATUS   CHECK              DETAIL\n"}
	with := print(doctorTable{})
	for _, h := range headers {
		if !strings.Contains(with, h) {
			t.Errorf("the table lacks the header %q:\n%s", h, with)
		}
	}
	without := print(doctorTable{noHeaders: true})
	if strings.Contains(without, "STATUS") || strings.Count(with, "\n")-strings.Count(without, "\n") != len(headers) {
		t.Errorf("--no-headers: want the %d header lines alone gone:\n%s", len(headers), without)
	}
	for _, re := range []string{`\n  FAIL +vfio +no IOMMU groups +not needed\n`, `\n  FAIL +namespace-opt-in +namespace web has StackInstance demo`, `\n  fix vfio: `} {
		if !regexp.MustCompile(re).MatchString(without) {
			t.Errorf("--no-headers lost %q:\n%s", re, without)
		}
	}
	// The flag is doctor's: a missing kubeconfig is what stops it (exit 2), not the flag.
	_, errOut, code := run(t, "doctor", "--no-headers", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if code != 2 || !strings.Contains(errOut, "kubeconfig") {
		t.Errorf("doctor --no-headers: exit %d, %s", code, errOut)
	}
}
