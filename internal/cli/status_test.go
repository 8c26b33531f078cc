package cli

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		if h, cfg := configColumns(c.pod, c.current); h != c.hash || cfg != c.config {
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
	for _, c := range []struct {
		pod             *corev1.Pod
		state, restarts string
	}{
		{dp(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true), "Running, ready", "3"},
		{dp(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}, false), "Waiting: ImagePullBackOff", "3"},
		{dp(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}, false), "Terminated: Error (exit 1)", "3"},
		{terminating, "Terminating, Running, not ready", "3"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "no status (pod Pending)", "0"},
	} {
		if s, r := dataplaneColumns(c.pod); s != c.state || r != c.restarts {
			t.Errorf("dataplaneColumns = %q, %q; want %q, %q", s, r, c.state, c.restarts)
		}
	}
}
