package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// nginxWorkload is Debian's Nginx (localhost/nginx:1.22) injected with the shim, its
// configuration from a ConfigMap, run as `nginx -c <conf>`: the launcher judges the file and
// adds worker_processes, worker_cpu_affinity and daemon off with -g.
func nginxWorkload(name, conf string) string {
	return fixtures.YAML(fixtures.ConfigMap(name, injectedNS, map[string]string{"nginx.conf": strings.TrimSpace(conf) + "\n"}),
		injectedDeployment(name, 5, corev1.Container{
			Name: "nginx", Image: "localhost/nginx:1.22", Command: []string{"nginx", "-c", "/etc/nginx/e2e/nginx.conf"},
			VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/nginx/e2e"}},
		}, fixtures.WithConfigMapVolume("conf", name)))
}

const shimNginxConf = `user www-data;
pid /run/nginx.pid;
error_log stderr;
events { use epoll; multi_accept on; }
http {
    sendfile off;
    access_log off;
    server { listen 80 reuseport; return 204; }
}`

// checkNginxWorkersOnOwnCPUs: every worker of the injected Nginx is pinned to a CPU of its own
// in the app container's cpuset, as the -g worker_cpu_affinity the launcher logged says. This
// node has 2 CPUs: the kubelet reserves CPU 0 (kubeReserved rounds up to a CPU) and gives the
// dataplane CPU 1, so the app container has the one CPU of the shared pool and one worker per
// F-Stack instance (1). Distinct CPUs for several workers are shown by the launcher's unit
// tests and were run by hand with Debian's nginx 1.22 on 2 CPUs.
func checkNginxWorkersOnOwnCPUs(t *testing.T) {
	const name = "e2e-nginx"
	mustApply(t, nginxWorkload(name, shimNginxConf))
	p := waitPodOf(t, name)
	appCPUs := cpusOf(t, podProcesses(t, p, "fstack-launcher"))
	own, err := cpuset.Parse(appCPUs)
	if err != nil {
		t.Fatalf("the launcher's Cpus_allowed_list %q: %v", appCPUs, err)
	}
	workers := waitNginxWorkers(t, p, 1, "worker_processes = "+podcontract.EnvShimInstances+", set by the launcher")
	var seen []string
	for _, pid := range workers {
		c := cpusOf(t, []int{pid})
		if cpu, err := strconv.Atoi(c); err != nil || !own.Contains(cpu) || slices.Contains(seen, c) {
			t.Fatalf("worker %d runs on CPUs %q: want one CPU of the container's %q, its own (others: %v)", pid, c, appCPUs, seen)
		}
		seen = append(seen, c)
	}
	logs, _ := env.Kubectl("logs", "-n", injectedNS, p.Name, "-c", "nginx")
	logs = logtest.Readable(logs)
	if !strings.Contains(logs, "nginx: set worker_cpu_affinity for 1 workers on the container's CPUs "+appCPUs) {
		t.Fatalf("the launcher did not log the affinity it set:\n%s", logs)
	}
	t.Logf("app cpuset %s, workers on %v", appCPUs, seen)
	deleteAndWait(t, name, p)
}

// checkMisconfiguredNginxRefused: sendfile on (static files would go out as empty 200s) is
// refused by the launcher, with the file, line and directive in the container's log.
func checkMisconfiguredNginxRefused(t *testing.T) {
	const name = "e2e-nginx-bad"
	mustApply(t, nginxWorkload(name, strings.Replace(shimNginxConf, "sendfile off;", "sendfile on;", 1)))
	want := `/etc/nginx/e2e/nginx.conf:6: "sendfile on": F-Stack's shim does not hook sendfile()`
	var logs string
	err := framework.Poll("the refused nginx's log", 3*time.Minute, time.Second, func() (bool, string, error) {
		p := podOf(t, name)
		if p == nil {
			return false, "no pod yet", nil
		}
		for _, prev := range []bool{false, true} {
			args := []string{"logs", "-n", injectedNS, p.Name, "-c", "nginx"}
			if prev {
				args = append(args, "--previous")
			}
			logs, _ = env.Kubectl(args...)
			logs = logtest.Readable(logs)
			if strings.Contains(logs, want) {
				s := status(p, "nginx")
				return s != nil && exitedWith(s, 78), framework.PodSummary(p), nil
			}
		}
		return false, framework.PodSummary(p), nil
	})
	if err != nil {
		t.Fatalf("%v\nlast log:\n%s", err, logs)
	}
	if !strings.Contains(logs, `write "sendfile off;"`) {
		t.Fatalf("the refusal does not say what to write:\n%s", logs)
	}
	t.Logf("refused: %s", strings.TrimSpace(logs))
	deleteAndWait(t, name, podOf(t, name))
}

func exitedWith(s *corev1.ContainerStatus, code int32) bool {
	for _, st := range []corev1.ContainerState{s.State, s.LastTerminationState} {
		if st.Terminated != nil && st.Terminated.ExitCode == code {
			return true
		}
	}
	return false
}

func podOf(t *testing.T, app string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(injectedNS), client.MatchingLabels{"app": app}); err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}

func waitPodOf(t *testing.T, app string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := framework.Poll("the "+app+" pod Running and Ready", 4*time.Minute, time.Second, func() (bool, string, error) {
		got = podOf(t, app)
		if got == nil {
			return false, "no pod yet", nil
		}
		return got.Status.Phase == corev1.PodRunning && framework.PodReady(got), framework.PodSummary(got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// nginxWorkers are the host PIDs of the pod's "nginx: worker process" processes.
func nginxWorkers(t *testing.T, p *corev1.Pod) []int {
	t.Helper()
	var out []int
	for _, pid := range podProcesses(t, p, "nginx") {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasPrefix(string(cmd), "nginx: worker process") {
			out = append(out, pid)
		}
	}
	return out
}

// waitNginxWorkers waits until the pod has want Nginx workers: the pod can be Ready (the
// dataplane's probes, a tcpSocket probe the master's listener answers) a moment before the
// master has forked them, so one look right after Ready saw none now and then.
func waitNginxWorkers(t *testing.T, p *corev1.Pod, want int, why string) []int { //nolint:unparam // every stack of the suite has one F-Stack instance today; want says what the caller expects
	t.Helper()
	var workers []int
	err := framework.Poll(fmt.Sprintf("%d nginx workers (%s)", want, why), time.Minute, time.Second, func() (bool, string, error) {
		workers = nginxWorkers(t, p)
		return len(workers) == want, fmt.Sprintf("%d nginx workers", len(workers)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return workers
}

// cpusOf is the Cpus_allowed_list of the first process.
func cpusOf(t *testing.T, pids []int) string {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no such process in the pod")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in /proc/%d/status", pids[0])
	return ""
}

func deleteAndWait(t *testing.T, name string, p *corev1.Pod) {
	t.Helper()
	if out, err := env.Kubectl("delete", "deployment,configmap", name, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if p != nil {
		waitPodResourcesGone(t, p)
	}
}
