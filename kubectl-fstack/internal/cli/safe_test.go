package cli

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// hostile holds what a compromised node agent (or an editor of nodes or pods) can put in a
// string: a screen clear and colour, a window-title OSC, a bidi override, C1 CSI, DEL, a tab that
// would shift columns, a newline that would forge a line, and a byte that is not UTF-8.
const hostile = "ok\x1b[2J\x1b[32mPASS\x1b]0;title\x07\u202etxt\u009b1m\x7f\tcol\nfake line\xff"

func assertNoControl(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r == '\n' {
			continue
		}
		if r < 0x20 && r != ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' {
			t.Fatalf("%s prints the raw rune %U:\n%q", what, r, out)
		}
	}
	for _, want := range []string{`\x1b[2J`, `\x1b]0;title\a`, `\u202e`, `\u009b`, `\x7f`, `\tcol\nfake line`} {
		if !strings.Contains(out, want) {
			t.Errorf("%s does not show %s as text:\n%s", what, want, out)
		}
	}
}

// Doctor prints the node report's strings, which the node agent writes, as text: no raw ESC or
// other control character reaches the terminal, in the checks, the fix lines and the error of a
// report that does not parse.
func TestDoctorPrintsNoRawEscape(t *testing.T) {
	r := &nodecheck.Report{Checks: []nodecheck.Check{{Name: "ovs" + hostile, Status: nodecheck.Status("fail" + hostile), Detail: hostile, Fix: hostile}}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}}}
	var out bytes.Buffer
	printNodeReport(&out, n)
	if strings.Count(out.String(), "\n") != 5 { // the node, its labels, the header, the check, its fix
		t.Errorf("a newline in the report forged a line:\n%s", out.String())
	}
	assertNoControl(t, "doctor", out.String())

	n.Annotations[fsv1.NodeReportAnnotation] = "{\"checks\": " + hostile
	out.Reset()
	printNodeReport(&out, n)
	if !strings.Contains(out.String(), "unreadable report") || strings.ContainsAny(out.String(), "\x1b\x07\x7f") {
		t.Errorf("an unreadable report:\n%q", out.String())
	}
}

// Status prints pod annotations and status, which anyone who may edit them writes, as text.
func TestStatusPrintsNoRawEscape(t *testing.T) {
	si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "web"}}
	si.Status.Ready = hostile
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{podcontract.ConfigHashAnnotation: "\x1b[2J"}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: hostile}}}}}}
	// The supervisor's /status is the pod's to write: its reason and app names are text too.
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	sv := &podcontract.DataplaneStatus{Reason: hostile, Ports: []podcontract.PortStatus{{Attachment: hostile}},
		Restarts: podcontract.InPlaceRestarts{Apps: map[string]podcontract.RestartCount{hostile: {Total: 1}}}}
	tab := newStackStatusList()
	tab.addStack(si, []corev1.Pod{pod, running}, podStatuses{got: map[podKey]*podcontract.DataplaneStatus{{"", "q"}: sv}})
	var out bytes.Buffer
	if err := tab.writeTable(&out, statusTable{withNamespace: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Running, not ready: ") {
		t.Errorf("the supervisor's reason is not shown:\n%s", out.String())
	}
	if strings.Count(out.String(), "\n") != 3 {
		t.Errorf("a newline in a column forged a line:\n%s", out.String())
	}
	assertNoControl(t, "status", out.String())
	if !strings.Contains(out.String(), `fake line\xff`) {
		t.Errorf("a byte that is not UTF-8 is not shown as text:\n%s", out.String())
	}
}

// -o json and -o yaml escape by their own encoding: no raw control character reaches the
// terminal, -o yaml does not fail on one (YAML's parser refuses raw DEL and C1, which
// encoding/json leaves raw), and the string comes back unchanged when the output is read (safe
// would change it).
func TestStructuredOutputPrintsNoRawEscape(t *testing.T) {
	si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "web"}}
	si.Status.Ready = "\x1b[2J\x1b]0;title\a\u202e\u009b\x7f\tcol\nfake line"
	l := newStackStatusList()
	l.addStack(si, nil, podStatuses{})
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := (&outputFlags{print: newPrintFlagsFor(format)}).printObject(l, &out); err != nil {
			t.Fatal(err)
		}
		// YAML's emitter escapes ESC, BEL, DEL and C1 but keeps Unicode format characters (a bidi
		// override) as text, as kubectl -o yaml does; JSON escapes them too (escapeJSON).
		raw := "\x1b\x07\x7f\u009b"
		if format == "json" {
			raw += "\u202e"
		}
		if strings.ContainsAny(out.String(), raw) {
			t.Errorf("-o %s printed a raw control character:\n%q", format, out.String())
		}
		var back StackStatusList
		if err := yaml.Unmarshal(out.Bytes(), &back); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		if len(back.Items) != 1 || back.Items[0].Ready != si.Status.Ready {
			t.Errorf("-o %s changed the string: %+v", format, back.Items)
		}
	}
}

func TestSafeKeepsPrintableText(t *testing.T) {
	for _, s := range []string{"", "PASS  ovs-bridge  bridge \"br-fstack\", datapath netdev", "Größe ≤ 2 MiB", `C:\path`} {
		if got := safe(s); got != s {
			t.Errorf("safe(%q) = %q", s, got)
		}
	}
}
