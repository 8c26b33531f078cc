package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

var (
	linkUpSeries    = regexp.MustCompile(`(?m)^fstack_port_link_up\{attachment="[^"]*",port="0"\} (\d+)$`)
	linkDownsSeries = regexp.MustCompile(`(?m)^fstack_port_link_down_total\{attachment="[^"]*",port="0"\} (\d+)$`)
	generationLine  = regexp.MustCompile(`(?m)^fstack_dataplane_generation (\d+)$`)
)

// checkOVSRestartWhileServing: OVS is restarted under the serving pod p. F-Stack, and the
// stand-in with it (testpmd without link-status interrupts), reads its link only at start: the
// port stayed disconnected behind a Ready pod until the supervisor asked the link every second.
// Now the supervisor sees the port go down (its /readyz answers 503 naming the port, the link
// metric is 0 and the fall counted, an ERROR line), and once OVS is back the same dataplane
// takes OVS's connection again: no restart (the generation unchanged), OVS reports the
// interface connected, pings get through, /readyz is 200 and the metric 1.
func checkOVSRestartWhileServing(t *testing.T, p *corev1.Pod) {
	t.Helper()
	peer, err := nodetest.AttachPeer(env.Vsctl, env.OVSNetns, env.OVSBridge, "e2e-peer", "e2ev", peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Ping(servedAddr(t, p), 5); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	base := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(podcontract.SupervisorPort))
	before := scrapeLink(t, base)
	if before.up != 1 {
		t.Fatalf("fstack_port_link_up of the serving pod = %d, want 1", before.up)
	}

	// /readyz is watched through the restart: the port is down from OVS's exit until the
	// supervisor's first look after OVS is back, which spans OVS's whole start.
	var mu sync.Mutex
	var notReady []string
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		c := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := c.Get(base + podcontract.ReadyzPath)
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				mu.Lock()
				notReady = append(notReady, strings.TrimSpace(string(body)))
				mu.Unlock()
			}
		}
	}()
	restartOVS(t)
	checkPortConnected(t, p)
	if _, err := peer.Ping(servedAddr(t, p), 5); err != nil {
		t.Errorf("after the restart, through the reconnected port: %v", err)
	}
	err = framework.Poll("the dataplane's /readyz 200 and its link up after the OVS restart", 2*time.Minute, 500*time.Millisecond, func() (bool, string, error) {
		code, body := get(base + podcontract.ReadyzPath)
		l := scrapeLink(t, base)
		return code == http.StatusOK && l.up == 1, fmt.Sprintf("/readyz %d %q, link %+v", code, body, l), nil
	})
	close(stop)
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	waitPodReady(t, p.Namespace, p.Name)

	after := scrapeLink(t, base)
	if after.downs <= before.downs {
		t.Errorf("fstack_port_link_down_total %d -> %d across the OVS restart: the fall was not seen", before.downs, after.downs)
	}
	if after.generation != before.generation {
		t.Errorf("fstack_dataplane_generation %d -> %d: the port must reconnect in place, without a dataplane restart", before.generation, after.generation)
	}
	mu.Lock()
	seen := notReady
	mu.Unlock()
	if !slicesContainSub(seen, "port 0 (attachment "+env.Attachment+"): link down for ") {
		t.Errorf("/readyz never answered 503 naming the port while OVS restarted; 503s seen: %q", seen)
	}
	logs, _ := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", podcontract.DataplaneContainer)
	logs = logtest.Readable(logs)
	for _, want := range []string{"port link down", "port link up again"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the dataplane's log lacks %q:\n%s", want, logs)
		}
	}
	t.Logf("OVS restarted under %s: %d 503s from /readyz (first %q), link downs %d -> %d, generation %d",
		p.Name, len(seen), first(seen), before.downs, after.downs, after.generation)
}

type linkState struct{ up, downs, generation int }

// scrapeLink reads port 0's link series and the generation from the supervisor's /metrics; a
// missing series reads -1.
func scrapeLink(t *testing.T, base string) linkState {
	t.Helper()
	code, body := get(base + podcontract.MetricsPath)
	if code != http.StatusOK {
		t.Fatalf("GET %s%s = %d %s", base, podcontract.MetricsPath, code, body)
	}
	num := func(re *regexp.Regexp) int {
		m := re.FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return linkState{up: num(linkUpSeries), downs: num(linkDownsSeries), generation: num(generationLine)}
}

func get(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func slicesContainSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func first(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}
