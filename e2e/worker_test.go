package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// exitAppBroken is the launcher's exit code when it stopped an app that could not serve
// (dataplane-image/internal/launcher.ExitAppBroken; the e2e suite does not import the launcher).
const exitAppBroken = 70

// checkKilledWorkerRecovers: the sample Nginx (httpGet readiness, tcpSocket liveness) under the
// suite's stack, whose shim mode is the default kernel-event+multi-sc, loses its one worker to
// SIGKILL, as to the OOM killer. The stand-in shim reproduces F-Stack's multi-SC fork hook
// (dataplane-image/standin/shim/fork.c): every worker the master respawns dies with SIGSEGV at
// once, then fork fails and the master has none, still holding its listener. Before the
// launcher watched the workers, the pod stayed Running, not Ready, with its liveness probe
// passing, for good. Now the launcher stops the app and exits 70, the kubelet restarts the
// container, and Nginx serves again.
func checkKilledWorkerRecovers(t *testing.T) {
	mustApply(t, nginxSample(t))
	p := waitNginxReady(t)
	workers := waitNginxWorkers(t, p, 1, "one per F-Stack instance")
	before := status(p, "nginx").RestartCount
	if _, err := nodetest.Run("kill", "-9", strconv.Itoa(workers[0])); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	err := framework.Poll("the nginx container restarted by its launcher (exit 70) and the pod Ready again", 3*time.Minute, time.Second, func() (bool, string, error) {
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, got); err != nil {
			return false, err.Error(), nil
		}
		s := status(got, "nginx")
		last := s.LastTerminationState.Terminated
		if s.RestartCount > before && (last == nil || last.ExitCode != exitAppBroken) {
			return false, "", fmt.Errorf("the nginx container restarted, but not by its launcher: last state %+v", s.LastTerminationState)
		}
		return s.RestartCount > before && framework.PodReady(got), framework.PodSummary(got), nil
	})
	if err != nil {
		logs, _ := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", "nginx")
		t.Fatalf("%v\nnginx log:\n%s", err, logs)
	}
	prev, _ := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", "nginx", "--previous")
	prev = logtest.Readable(prev)
	for _, want := range []string{"dies with SIGSEGV at once", "workers up for", "it cannot serve; stopping it, then exiting 70"} {
		if !strings.Contains(prev, want) {
			t.Fatalf("the previous nginx container's log lacks %q:\n%s", want, prev)
		}
	}
	if n := len(nginxWorkers(t, got)); n != 1 {
		t.Fatalf("%d nginx workers after the restart, want 1", n)
	}
	// Serving again: Nginx answers the readiness probe's GET through the dataplane's agent.
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(got.Status.PodIP, fmt.Sprint(podcontract.SupervisorPort)),
		podcontract.AppProbePath("nginx", podcontract.ProbeReadiness))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "HTTP 200") {
		t.Fatalf("GET %s = %d %q after the restart, want 200 with Nginx's HTTP 200", url, resp.StatusCode, body)
	}
	t.Logf("recovered: %s; %s", framework.PodSummary(got), strings.TrimSpace(string(body)))
	deleteNginxSample(t, got)
}
