package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// reloads is how many `nginx -s reload` the reload step makes, as issue 40 §3 counts them.
const reloads = 10

// checkReloadsRestartNginxInPlace: `nginx -s reload` under the shim, ten times, while a client
// asks the sample Nginx for its page every 50 ms. The launcher starts each new Nginx beside the
// running one and stops the old one once the new one's workers are up (docs/nginx.md, "Reload"):
// no request fails, the new master existed before the old one was told to stop (the launcher's
// log), each reload re-reads the configuration, and the shim's free contexts end as they began.
//
// Real: the launcher, the sample's Nginx (Debian's, two masters at once on one port with
// reuseport), the dataplane's probe agent, through which the client asks (as the kubelet's
// readiness probe does), and the stand-in shim's context slots. Stand-in: the shim keeps kernel
// sockets in the pod's network namespace, where Linux's SO_REUSEPORT spreads connections over
// both masters' listeners (F-Stack gives them to the older one) and resets what waits in the
// queue of a listener as it closes, unless net.ipv4.tcp_migrate_req moves it to the other. That
// reset is the kernel's, not the launcher's doing, so the step sets tcp_migrate_req in the pod:
// a request then fails only when no listener at all is left, as between the stop and the start
// of the reload before the overlap (the blackhole of the stand-in shim makes the probe time out).
func checkReloadsRestartNginxInPlace(t *testing.T) {
	mustApply(t, nginxSample(t))
	p := waitNginxReady(t)
	waitNginxWorkers(t, p, 1, "one per F-Stack instance")
	migrateClosingListenersQueue(t, p)
	free := shimFree(t, p)
	client := startPagePoller(p, 50*time.Millisecond)
	var done int
	var during []int
	p = faultsInPlaceN(t, p, reloads, "nginx -s reload", func(t *testing.T, _ int, p *corev1.Pod) {
		done = mustStatus(t, p).Restarts.Apps["nginx"].ByReason[podcontract.AppRestartReload]
		during = append(during, client.polls())
		if out, err := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", "nginx", "--", "nginx", "-c", "/etc/nginx/kube-fstack/nginx.conf", "-s", "reload"); err != nil {
			t.Fatalf("nginx -s reload: %v\n%s", err, out)
		}
	}, func(st *podcontract.Status, p *corev1.Pod) (bool, string) {
		// Counted once the old Nginx has stopped: its worker is gone then.
		n := st.Restarts.Apps["nginx"].ByReason[podcontract.AppRestartReload]
		if n <= done {
			return false, fmt.Sprintf("nginx restarts for a reload %d (was %d)", n, done)
		}
		if w := nginxWorkers(t, p); len(w) != 1 {
			return false, fmt.Sprintf("nginx workers %v, want the new master's one", w)
		}
		return nginxServes(p)
	})
	polls, failures := client.end()
	during = append(during, polls)
	t.Logf("the client's requests before each reload and at the end: %v", during)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during %d reloads:\n%s", len(failures), polls, reloads, strings.Join(failures, "\n"))
	}
	for i := 1; i < len(during); i++ {
		if during[i] == during[i-1] {
			t.Errorf("the client made no request from reload %d's start to the next (requests %v): it was not polling", i, during)
		}
	}
	logs, err := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	checkReloadsOverlapped(t, logs)
	if last := mustStatus(t, p).Restarts.Apps["nginx"].Last; last == nil || last.Reason != podcontract.AppRestartReload || !strings.Contains(last.Message, "overlapped") {
		t.Errorf("/status's last nginx restart: %+v, want a reload that overlapped", last)
	}
	if err := framework.Poll("the shim's free contexts as before the reloads ("+free+")", 30*time.Second, 200*time.Millisecond, func() (bool, string, error) {
		now := shimFree(t, p)
		return now == free, "free " + now, nil
	}); err != nil {
		t.Error(err)
	}
	deleteNginxSample(t, p)
}

var (
	startedBeside = regexp.MustCompile(`msg="reload: the new nginx started beside the running one[^"]*".* pid=(\d+) old=(\d+)`)
	stoppingOld   = regexp.MustCompile(`msg="reload: the new nginx's workers are up; stopping the old one gracefully[^"]*".* pid=(\d+) old=(\d+)`)
)

// checkReloadsOverlapped reads the launcher's log: each reload started its new master (pid) and
// only then told the old one (old) to stop, and each reload's old master is the previous one's
// new master.
func checkReloadsOverlapped(t *testing.T, logs string) {
	t.Helper()
	var order []string // "start NEW OLD", "stop NEW OLD", in the log's order
	for _, line := range strings.Split(logs, "\n") {
		if m := startedBeside.FindStringSubmatch(line); m != nil {
			order = append(order, "start "+m[1]+" "+m[2])
		} else if m := stoppingOld.FindStringSubmatch(line); m != nil {
			order = append(order, "stop "+m[1]+" "+m[2])
		}
	}
	if len(order) != 2*reloads {
		t.Fatalf("the launcher's log has %d reload starts and stops, want %d each, in turn: %q\n%s", len(order), reloads, order, logs)
	}
	prev := ""
	for i := 0; i < len(order); i += 2 {
		start, stop := strings.Fields(order[i]), strings.Fields(order[i+1])
		if start[0] != "start" || stop[0] != "stop" || start[1] != stop[1] || start[2] != stop[2] {
			t.Errorf("reload %d: %q then %q: want the new master started (pid, old) before the old one is stopped", i/2+1, order[i], order[i+1])
		}
		if prev != "" && start[2] != prev {
			t.Errorf("reload %d replaced master %s, want the previous reload's new master %s", i/2+1, start[2], prev)
		}
		prev = start[1]
	}
}

// migrateClosingListenersQueue sets net.ipv4.tcp_migrate_req in the pod's network namespace
// (the stand-in's kernel sockets; see checkReloadsRestartNginxInPlace): a kernel without it
// (before 5.14) fails the step, which would then count the kernel's resets as the launcher's.
func migrateClosingListenersQueue(t *testing.T, p *corev1.Pod) {
	t.Helper()
	pids := podProcesses(t, p, "nginx")
	if len(pids) == 0 {
		t.Fatalf("no nginx process in pod %s", p.Name)
	}
	if _, err := nodetest.Run("nsenter", "-t", strconv.Itoa(pids[0]), "-n", "sysctl", "-w", "net.ipv4.tcp_migrate_req=1"); err != nil {
		t.Fatalf("net.ipv4.tcp_migrate_req in the pod's network namespace: %v", err)
	}
}

// pagePoller asks the sample Nginx for its page through the dataplane's probe agent (nginxServes)
// every interval until end, keeping every failure.
type pagePoller struct {
	p        *corev1.Pod
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	n        int
	failures []string
}

func startPagePoller(p *corev1.Pod, interval time.Duration) *pagePoller {
	c := &pagePoller{p: p, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			ok, why := nginxServes(c.p)
			c.mu.Lock()
			c.n++
			if !ok {
				c.failures = append(c.failures, time.Now().Format("15:04:05.000")+" "+why)
			}
			c.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return c
}

// polls is how many requests the poller has made so far.
func (c *pagePoller) polls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// end stops the poller and returns its requests and failures.
func (c *pagePoller) end() (int, []string) {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.failures
}
