package cli

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The cluster side of `status` is proven against kube-apiserver in operator/test/envtest; these
// are the cases that need no cluster.
func TestStatusRefusesBadInvocations(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--kubeconfig", missing}, "kubeconfig"},
		{[]string{"status", "-A", "web"}, "name a StackInstance or give -A, not both"},
		{[]string{"status", "a", "b"}, "accepts at most 1 arg"},
	} {
		_, errOut, code := run(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestStatusColumns(t *testing.T) {
	for _, c := range []struct{ pod, current, hash, config string }{
		{"", "abc", "-", "unknown (not injected)"},
		{"abc", "", "abc", "unknown (no current hash yet)"},
		{"0123456789abcdef", "0123456789abcdef", "0123456789ab", "current"},
		{"0123456789abcdef", "fedcba9876543210", "0123456789ab", "old (current fedcba987654)"},
	} {
		si := &fsv1.StackInstance{}
		si.Status.ConfigHash = c.current
		l := newStackStatusList()
		l.addStack(si, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{podcontract.ConfigHashAnnotation: c.pod}}}}, podStatuses{})
		if h, cfg := configColumns(l.Items[0].Pods[0], c.current, false); h != c.hash || cfg != c.config {
			t.Errorf("configColumns(%q, %q) = %q, %q; want %q, %q", c.pod, c.current, h, cfg, c.hash, c.config)
		}
	}
	now := metav1.Now()
	dp := func(s corev1.ContainerState, ready bool) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "other", RestartCount: 9},
			{Name: podcontract.DataplaneContainer, State: s, Ready: ready, RestartCount: 3}}}}
	}
	terminating := dp(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, false)
	terminating.DeletionTimestamp = &now
	program := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		fsv1.StatusAnnotation: `{"stack":"s","dataplane":"fstack-dataplane","program":{"container":"web","mode":"Nginx"}}`}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: true, RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	for _, c := range []struct {
		pod             *corev1.Pod
		state, restarts string
	}{
		{dp(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true), "Running, ready", "3"},
		{dp(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}, false), "Waiting: ImagePullBackOff", "3"},
		{dp(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}, false), "Terminated: Error (exit 1)", "3"},
		{terminating, "Terminating, Running, not ready", "3"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "no status (pod Pending)", "0"},
		// A program linked with libfstack (spec.program) is the dataplane: a regular container.
		{program, "Running, ready (program Nginx, was container web)", "1"},
	} {
		l := newStackStatusList()
		l.addStack(&fsv1.StackInstance{}, []corev1.Pod{*c.pod}, podStatuses{})
		if s, r := dataplaneColumns(l.Items[0].Pods[0]); s != c.state || r != c.restarts {
			t.Errorf("dataplaneColumns = %q, %q; want %q, %q", s, r, c.state, c.restarts)
		}
	}
}

// -o wide adds the pod's IP and the dataplane's image and shows whole hashes; -o json and -o
// yaml print the StackStatusList with the same facts as fields.
func TestStatusWideAndStructured(t *testing.T) {
	si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Name: "shown", Namespace: "web"}}
	si.Status.Ready, si.Status.ConfigHash = "1/2", "fedcba9876543210"
	code := int32(137)
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "shown-old", Annotations: map[string]string{podcontract.ConfigHashAnnotation: "0123456789abcdef"}},
			Spec: corev1.PodSpec{NodeName: "node-a"},
			Status: corev1.PodStatus{PodIP: "10.0.0.7", InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer,
				Image: "localhost/kube-fstack/dataplane:dev", RestartCount: 2,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: code}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shown-new", Annotations: map[string]string{podcontract.ConfigHashAnnotation: "fedcba9876543210"}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}},
	}
	l := newStackStatusList()
	l.addStack(si, pods, podStatuses{})
	var wide bytes.Buffer
	if err := l.writeTable(&wide, statusTable{wide: true}); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`^STACK +READY +POD +NODE +ADDRESSES +CONFIG-HASH +CONFIG +DATAPLANE +RESTARTS +APP-RESTARTS +KERNEL-IP +IMAGE\n`,
		`\nshown +1/2 +shown-old +node-a +- +0123456789abcdef +old \(current fedcba9876543210\) +Terminated: OOMKilled \(exit 137\) +2 +0 +10\.0\.0\.7 +localhost/kube-fstack/dataplane:dev\n`,
		`\nshown +1/2 +shown-new +- +- +fedcba9876543210 +current +no status \(pod Pending\) +0 +0 +- +-\n`,
	} {
		if !regexp.MustCompile(re).MatchString(wide.String()) {
			t.Errorf("-o wide does not match %q:\n%s", re, wide.String())
		}
	}
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := (&outputFlags{print: newPrintFlagsFor(format)}).printObject(l, &out); err != nil {
			t.Fatal(err)
		}
		var got StackStatusList
		if err := yaml.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out.String())
		}
		want := StackStatusList{TypeMeta: metav1.TypeMeta{APIVersion: "cli.kubefstack.io/v1alpha1", Kind: "StackStatusList"},
			Items: []StackStatus{{Namespace: "web", Name: "shown", Ready: "1/2", ConfigHash: "fedcba9876543210", Pods: []PodStatus{
				{Name: "shown-new", ConfigHash: "fedcba9876543210", Config: "current",
					Dataplane: DataplaneStatus{State: "unknown", Reason: "no status (pod Pending)"}},
				{Name: "shown-old", Node: "node-a", IP: "10.0.0.7", ConfigHash: "0123456789abcdef", Config: "old",
					Dataplane: DataplaneStatus{State: "terminated", Reason: "OOMKilled", ExitCode: &code, Restarts: 2, Image: "localhost/kube-fstack/dataplane:dev"}},
			}}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("-o %s (-want +got):\n%s\n%s", format, diff, out.String())
		}
	}
}

// -o takes the table's formats and cli-runtime's printers' and names the others, before the
// cluster is asked.
func TestOutputFormatRefused(t *testing.T) {
	_, errOut, code := run(t, "status", "-o", "xml", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if code != 1 || !strings.Contains(errOut, `--output "xml"`) || !strings.Contains(errOut, "json, yaml") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// The table shows each pod's served addresses (the annotation's; the snapshot is never read),
// other ports' with their index, and the stack's VIPs; -o json has them as fields.
func TestStatusServedAddresses(t *testing.T) {
	si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "web"}}
	si.Spec.Ports = []fsv1.PortSpec{{Addressing: fsv1.Addressing{VIPs: []string{"10.99.0.100"}}}}
	snapshot := `{"ports":[{"name":"data","ipv4":{"from":"Static","address":"10.99.0.10/24"}},{"name":"b","ipv4":{"from":"Attachment"}}]}`
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{podcontract.SpecAnnotation: snapshot,
			podcontract.AddressesAnnotation: "0=10.99.0.11,1=10.57.0.11"}}, Status: corev1.PodStatus{PodIP: "10.244.0.9"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{podcontract.SpecAnnotation: snapshot}}},
	}
	l := newStackStatusList()
	l.addStack(si, pods, podStatuses{})
	var out bytes.Buffer
	if err := l.writeTable(&out, statusTable{wide: true}); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`\ns +0/0 +a +- +10\.99\.0\.11, 10\.57\.0\.11 \(port 1\), vip 10\.99\.0\.100 +- .* 10\.244\.0\.9 +-\n`,
		`\ns +0/0 +b +- +unknown: it has no kubefstack\.io/addresses annotation: it was not injected.*, vip 10\.99\.0\.100 +`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("table does not match %q:\n%s", re, out.String())
		}
	}
	if a := l.Items[0].Pods[0].Addresses; len(a) != 2 || a[1] != (ServedAddress{Port: 1, Address: "10.57.0.11"}) || l.Items[0].VIPs[0] != "10.99.0.100" {
		t.Errorf("addresses %+v, VIPs %v", a, l.Items[0].VIPs)
	}
}

// What the supervisor could not keep apart (its /status placement) is said in the pod's row.
func TestStatusSaysWhatTheLcoresShare(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: podcontract.DataplaneContainer, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	sv := &podcontract.DataplaneStatus{Reason: "ready", Placement: &podcontract.Placement{LcoreCPUs: []int{0},
		Warnings: podcontract.PlacementWarnings([]int{0}, []int{0}, []int{0})}}
	l := newStackStatusList()
	l.addStack(&fsv1.StackInstance{}, []corev1.Pod{pod}, podStatuses{got: map[podKey]*podcontract.DataplaneStatus{{"web", "p"}: sv}})
	state, _ := dataplaneColumns(l.Items[0].Pods[0])
	if !strings.HasPrefix(state, "Running, ready; CPUs shared: lcore CPU 0 is also polled by the switch's PMD thread") {
		t.Errorf("dataplane column %q does not say what the lcore shares", state)
	}
	if l.Items[0].Pods[0].Dataplane.Placement == nil {
		t.Error("-o json lacks the placement")
	}

	// The row says what the operator's CPUsShared event says (podcontract's one line), cut to
	// the row's length: both warnings when they fit, an lcore on a switch CPU that the
	// warnings omit, and a pod's control characters escaped.
	sv.Placement = &podcontract.Placement{LcoreCPUs: []int{0, 1}, SwitchCPUs: []int{1}, Warnings: []string{"one\x1b[2J", "two"}}
	l = newStackStatusList()
	l.addStack(&fsv1.StackInstance{}, []corev1.Pod{pod}, podStatuses{got: map[podKey]*podcontract.DataplaneStatus{{"web", "p"}: sv}})
	state, _ = dataplaneColumns(l.Items[0].Pods[0])
	want := "Running, ready; " + podcontract.Clip(sv.Placement.SharedCPUs(), maxReasonText)
	if state != want || !strings.HasPrefix(state, `Running, ready; CPUs shared: one\x1b[2J; two; lcore CPU 1 is also polled by the switch's PMD thread`) {
		t.Errorf("dataplane column %q, want %q", state, want)
	}
}
