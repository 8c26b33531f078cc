package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// Restarts in place (issue 29 §2): the supervisor starts a new dataplane generation inside its
// container when an F-Stack process dies, and the launcher starts the app again inside its
// container, so the kubelet's back-off (10 s, 20 s, 40 s ...) never applies and the containers'
// restart counts do not move; /status counts the restarts instead. Each check makes three
// faults of one kind within two minutes, waits for the pod to serve again after each, and logs
// each recovery time for the lead's note.

// dataplaneStatus is the supervisor's /status, from the node as the CLI reads it.
func dataplaneStatus(p *corev1.Pod) (*podcontract.Status, error) {
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(podcontract.SupervisorPort)), podcontract.StatusPath)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, podcontract.StatusMax+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	var st podcontract.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("GET %s: %w: %s", url, err, body)
	}
	return &st, nil
}

func mustStatus(t *testing.T, p *corev1.Pod) *podcontract.Status {
	t.Helper()
	st, err := dataplaneStatus(p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func refreshPod(p *corev1.Pod) (*corev1.Pod, error) {
	got := &corev1.Pod{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, got)
	return got, err
}

// restartCounts are the kubelet's restart counts of the pod's containers, by name.
func restartCounts(p *corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range list {
			out[s.Name] = s.RestartCount
		}
	}
	return out
}

// faultsInPlace makes three faults (fault(i) makes the i-th) and after each waits until
// recovered says the pod serves again, logging the time it took; the containers' restart counts
// must not move.
func faultsInPlace(t *testing.T, p *corev1.Pod, kind string, fault func(t *testing.T, i int, p *corev1.Pod), recovered func(st *podcontract.Status, p *corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	return faultsInPlaceN(t, p, 3, kind, fault, recovered)
}

// faultsInPlaceN is faultsInPlace with n faults.
func faultsInPlaceN(t *testing.T, p *corev1.Pod, n int, kind string, fault func(t *testing.T, i int, p *corev1.Pod), recovered func(st *podcontract.Status, p *corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	before := restartCounts(p)
	first := time.Now()
	var times []string
	for i := 1; i <= n; i++ {
		begin := time.Now()
		fault(t, i, p)
		var got *corev1.Pod
		err := framework.Poll(fmt.Sprintf("%s %d: serving again, restarted in place", kind, i), 3*time.Minute, 200*time.Millisecond, func() (bool, string, error) {
			var err error
			if got, err = refreshPod(p); err != nil {
				return false, err.Error(), nil
			}
			if now := restartCounts(got); fmt.Sprint(now) != fmt.Sprint(before) {
				return false, "", fmt.Errorf("a container was restarted by the kubelet (restart counts %v, were %v): %s", now, before, framework.PodSummary(got))
			}
			st, err := dataplaneStatus(got)
			if err != nil {
				return false, err.Error(), nil
			}
			ok, why := recovered(st, got)
			return ok && framework.PodReady(got), why + "; " + framework.PodSummary(got), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin).Round(100 * time.Millisecond)
		times = append(times, took.String())
		t.Logf("%s %d: serving again %s after the fault", kind, i, took)
		p = got
	}
	t.Logf("%s: %d faults in %s, recovered after %s; restart counts unchanged %v", kind, n, time.Since(first).Round(100*time.Millisecond), strings.Join(times, ", "), before)
	return p
}

// checkPrimaryKillsRecoverInPlace kills the dataplane's DPDK primary from the host three times:
// each time the supervisor starts a new generation in place and the app's launcher starts the
// app again against it (on main: both containers restarted by the kubelet, the second time
// after its back-off).
func checkPrimaryKillsRecoverInPlace(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	st0 := mustStatus(t, p)
	var gen, appRestarts int
	p = faultsInPlace(t, p, "kill -9 of the primary", func(t *testing.T, _ int, p *corev1.Pod) {
		st := mustStatus(t, p)
		gen, appRestarts = st.Generation, st.Restarts.Apps[appCont].ByReason[podcontract.AppRestartDataplane]
		pids := podProcesses(t, p, "dpdk-testpmd")
		if len(pids) == 0 {
			t.Fatalf("no dpdk-testpmd process in pod %s's cgroup", p.UID)
		}
		for _, pid := range pids {
			if _, err := nodetest.Run("kill", "-9", strconv.Itoa(pid)); err != nil {
				t.Fatal(err)
			}
		}
	}, func(st *podcontract.Status, p *corev1.Pod) (bool, string) {
		// The app counts as back once its launcher started it against the new generation:
		// a kill that lands while the app is still starting moves the generation under a
		// launcher that has nothing running to restart, so the count alone can lag.
		app := st.Restarts.Apps[appCont].ByReason[podcontract.AppRestartDataplane]
		started := appStartedGeneration(p)
		return st.Generation > gen && st.Ready && app > appRestarts && started == strconv.Itoa(st.Generation),
			fmt.Sprintf("generation %d (was %d), ready %t, app restarts for the dataplane %d, app started against generation %q", st.Generation, gen, st.Ready, app, started)
	})
	st := mustStatus(t, p)
	if d := st.Restarts.Dataplane.ByReason[podcontract.DataplaneRestartProcessExit] - st0.Restarts.Dataplane.ByReason[podcontract.DataplaneRestartProcessExit]; d != 3 {
		t.Errorf("/status counts %d more process_exit restarts of the dataplane, want 3: %+v", d, st.Restarts)
	}
	if last := st.Restarts.Dataplane.Last; last == nil || !strings.Contains(last.Message, "F-Stack process 0 (primary) exited") {
		t.Errorf("/status's last dataplane restart does not name the primary: %+v", last)
	}
	// The new primary serves the port again (its predecessor's socket was stale) and the
	// restarted app attached to it.
	checkPing(t, p)
	checkSecondaryAttached(t, p)
	return p
}

// appProcess is the host PID of the demo app's own process (what the launcher started: the
// script's `exec sleep infinity`).
func appProcess(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	for _, pid := range podProcesses(t, p, "sleep") {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if string(cmd) == "sleep\x00infinity\x00" {
			return pid
		}
	}
	t.Fatalf("no `sleep infinity` (the app) in pod %s", p.Name)
	return 0
}

// checkAppKillsRecoverInPlace kills the app (the launcher's child) three times, with SIGKILL
// as the OOM killer does: its launcher starts it again in its container.
func checkAppKillsRecoverInPlace(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	var killed, exited int
	p = faultsInPlace(t, p, "kill -9 of the app", func(t *testing.T, _ int, p *corev1.Pod) {
		exited = mustStatus(t, p).Restarts.Apps[appCont].ByReason[podcontract.AppRestartExited]
		killed = appProcess(t, p)
		if _, err := nodetest.Run("kill", "-9", strconv.Itoa(killed)); err != nil {
			t.Fatal(err)
		}
	}, func(st *podcontract.Status, p *corev1.Pod) (bool, string) {
		n := st.Restarts.Apps[appCont].ByReason[podcontract.AppRestartExited]
		if n <= exited {
			return false, fmt.Sprintf("app restarts for an exit %d (was %d)", n, exited)
		}
		for _, pid := range podProcesses(t, p, "sleep") {
			if pid != killed {
				return true, ""
			}
		}
		return false, "the app's process not back yet"
	})
	if last := mustStatus(t, p).Restarts.Apps[appCont].Last; last == nil || last.Reason != podcontract.AppRestartExited || !strings.Contains(last.Message, "killed by signal killed") {
		t.Errorf("/status's last app restart: %+v, want an exit by SIGKILL", last)
	}
	checkSecondaryAttached(t, p)
	return p
}

// nginxServes is the sample Nginx's readiness probe, through the dataplane's agent: Nginx's
// answer through F-Stack.
func nginxServes(p *corev1.Pod) (bool, string) {
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(podcontract.SupervisorPort)), podcontract.AppProbePath("nginx", podcontract.ProbeReadiness))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return false, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "HTTP 200"), fmt.Sprintf("GET %s = %d %q", url, resp.StatusCode, body)
}

// shimFree is the dataplane's reading of instance 0's free shim contexts.
func shimFree(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(podcontract.SupervisorPort)), podcontract.MetricsPath)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	m := regexp.MustCompile(`(?m)^fstack_shim_contexts_free\{[^}]*process="0"[^}]*\} (\d+)`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no fstack_shim_contexts_free of process 0 in /metrics:\n%s", body)
	}
	return string(m[1])
}

// checkKilledWorkersRecoverInPlace: the sample Nginx (httpGet readiness, tcpSocket liveness)
// under the suite's stack, whose shim mode is the default kernel-event+multi-sc, loses its one
// worker to SIGKILL, three times, and the shim's free contexts end as they began. The stand-in shim reproduces F-Stack's multi-SC fork hook
// (dataplane-image/standin/shim/fork.c): every worker the master respawns dies with SIGSEGV at
// once, then fork fails and the master has none, still holding its listener. The launcher's
// watch sees it, stops Nginx and starts it again in its container, and Nginx serves again;
// before, it exited 70 and the kubelet restarted the container (with its back-off).
func checkKilledWorkersRecoverInPlace(t *testing.T) {
	mustApply(t, nginxSample(t))
	p := waitNginxReady(t)
	waitNginxWorkers(t, p, 1, "one per F-Stack instance")
	free := shimFree(t, p)
	var broken int
	var killed int
	p = faultsInPlace(t, p, "kill -9 of the nginx worker", func(t *testing.T, _ int, p *corev1.Pod) {
		broken = mustStatus(t, p).Restarts.Apps["nginx"].ByReason[podcontract.AppRestartBroken]
		workers := waitNginxWorkers(t, p, 1, "one per F-Stack instance")
		killed = workers[0]
		if _, err := nodetest.Run("kill", "-9", strconv.Itoa(killed)); err != nil {
			t.Fatal(err)
		}
	}, func(st *podcontract.Status, p *corev1.Pod) (bool, string) {
		n := st.Restarts.Apps["nginx"].ByReason[podcontract.AppRestartBroken]
		if n <= broken {
			return false, fmt.Sprintf("nginx restarts for being broken %d (was %d)", n, broken)
		}
		if w := nginxWorkers(t, p); len(w) != 1 || w[0] == killed {
			return false, fmt.Sprintf("nginx workers %v", w)
		}
		return nginxServes(p)
	})
	// Each SIGKILLed worker and each master the launcher had to SIGKILL held a shim context:
	// they come back (patch 0007, the stand-in's supervisor as fstack), where on main each was
	// lost until the dataplane restarted.
	if err := framework.Poll("the shim's free contexts as before the kills ("+free+")", 30*time.Second, 200*time.Millisecond, func() (bool, string, error) {
		now := shimFree(t, p)
		return now == free, "free " + now, nil
	}); err != nil {
		t.Error(err)
	}
	logs, _ := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", "nginx")
	for _, want := range []string{"workers up for", "it cannot serve; stopping it, then starting it again", "restarting the app in place"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the nginx container's log lacks %q:\n%s", want, logs)
		}
	}
	deleteNginxSample(t, p)
}

// appStartedGeneration is the generation the demo app's launcher last started the app against
// (podcontract.AppStartedFile in its directory of the app-state volume), read on the node; ""
// when there is none yet.
func appStartedGeneration(p *corev1.Pod) string {
	b, err := os.ReadFile(filepath.Join("/var/lib/kubelet/pods", string(p.UID), "volumes/kubernetes.io~empty-dir",
		podcontract.AppStateVolume, appCont, podcontract.AppStartedFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
