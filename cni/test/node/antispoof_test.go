package node

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/flowkeeper"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// Anti-spoofing on br-fstack: testpmd stands in for the pod's F-Stack, which sends with the MAC
// of its virtio_user vdev (the device info's unless the StackInstance sets another). With the
// device info's MAC the veth peer's pings are answered; with another pod's MAC the answers (first
// of all the ARP reply) are dropped by the port's rules, and the drop rules count them.
func TestForgedSourceMACIsDropped(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1100)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	info := podDevInfo(t, n, p)
	podDir := filepath.Join(n.socketRoot(), p.uid)
	podIP := strings.Split(info.IPs[0], "/")[0]

	t.Run("own MAC passes", func(t *testing.T) {
		startTestpmd(t, podDir, info)
		waitConnected(t)
		peer := addVethPeer(t, "10.99.0.200/24")
		if _, err := peer.Ping(podIP, 1); err != nil {
			t.Fatalf("ping with the port's own MAC: %v", err)
		}
		if passed, _ := guardCounts(t); passed == 0 {
			t.Errorf("no frame went through the port's pass rules: are they there?\n%s", dumpFlows(t))
		}
	})

	t.Run("another MAC is dropped", func(t *testing.T) {
		assertForgedDropped(t, podDir, info, "10.99.0.201/24")
	})
}

// assertForgedDropped runs testpmd as the pod, sending with another pod's MAC, and asserts that
// the peer at addr gets no answer and the port's drop rules count the forged frames.
func assertForgedDropped(t *testing.T, podDir string, info *podcontract.DevInfo, addr string) {
	t.Helper()
	podIP := strings.Split(info.IPs[0], "/")[0]
	forged := *info
	forged.MAC = "02:fe:00:00:00:0a" // another pod's, e.g. the local cluster sample's
	startTestpmd(t, podDir, &forged)
	waitConnected(t)
	peer := addVethPeer(t, addr)
	_, dropped0 := guardCounts(t)
	var answered bool
	for range 10 { // until testpmd answers at all (the drop rules then count it)
		_, err := nodetest.Run("ip", "netns", "exec", peer.Netns, "ping", "-c", "2", "-i", "0.2", "-W", "1", podIP)
		answered = answered || err == nil
		if _, dropped := guardCounts(t); dropped > dropped0 {
			break
		}
	}
	if answered {
		t.Errorf("a pod sending with another MAC got its answers through")
	}
	if _, dropped := guardCounts(t); dropped <= dropped0 {
		t.Errorf("the port's drop rules counted no forged frame (%d before, %d after)\n%s", dropped0, dropped, dumpFlows(t))
	}
}

var nPackets = regexp.MustCompile(`n_packets=(\d+)`)

// guardCounts sums the packets of our ports' pass (NORMAL) and drop rules on the bridge: those
// with a cookie, which the bridge's own default flow has not.
func guardCounts(t *testing.T) (passed, dropped int) {
	t.Helper()
	for _, l := range strings.Split(dumpFlows(t), "\n") {
		l = strings.TrimSpace(l)
		m := nPackets.FindStringSubmatch(l)
		if m == nil || strings.Contains(l, "cookie=0x0,") {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		switch {
		case strings.HasSuffix(l, "actions=drop"):
			dropped += n
		case strings.HasSuffix(l, "actions=NORMAL"):
			passed += n
		}
	}
	return passed, dropped
}

func dumpFlows(t *testing.T) string {
	t.Helper()
	out, err := env.ovs.Ofctl("dump-flows", fmt.Sprintf("unix:%s/%s.mgmt", env.ovs.Dir, bridge))
	if err != nil {
		t.Fatalf("ovs-ofctl dump-flows: %v: %s", err, out)
	}
	return out
}

var inPortOf = regexp.MustCompile(`in_port=(\d+)`)

// assertNoGuardRules fails when a rule with a cookie is left after DEL on a number a port has,
// but for the rules of the ports named in live. DEL leaves the rules of a port ADD numbered on
// its number, where they match no port (the ADD that gives the number again clears it first);
// on a port's number they would be live.
func assertNoGuardRules(t *testing.T, live ...string) {
	t.Helper()
	var own []string
	for _, port := range live {
		own = append(own, fmt.Sprintf("cookie=%#x,", antispoof.Cookie(port)))
	}
	out, err := env.ovs.Vsctl("--no-headings", "--format=csv", "--columns=ofport", "list", "Interface")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, f := range strings.Fields(out) {
		held[f] = true
	}
	for _, l := range guardRules(t) {
		if slices.ContainsFunc(own, func(c string) bool { return strings.HasPrefix(l, c) }) {
			continue
		}
		if m := inPortOf.FindStringSubmatch(l); m == nil || held[m[1]] {
			t.Errorf("rule left after DEL on a port's number: %s", l)
		}
	}
}

// A second ADD of the same attachment (a runtime retrying) replaces the port, which OVS may
// number anew: the port keeps exactly one set of rules, all on its current ofport; DEL removes
// them.
func TestReAddKeepsOneSetOfRules(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1101)
	n.withIPAM = false // host-local refuses a second lease for the same container
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	first := guardRules(t)
	if len(first) == 0 {
		t.Fatalf("no anti-spoofing rules after ADD:\n%s", dumpFlows(t))
	}
	n.mustAdd(p)
	port := ports(t)[0]
	ofport := waitOFPort(t, port) // ADD does not wait for it
	again := guardRules(t)
	if len(again) != len(first) {
		t.Errorf("%d rules after the second ADD, %d after the first:\n%s", len(again), len(first), strings.Join(again, "\n"))
	}
	for _, l := range again {
		if !strings.Contains(l, "in_port="+ofport+",") && !strings.Contains(l, "in_port="+ofport+" ") {
			t.Errorf("rule not on the port's ofport %s: %s", ofport, l)
		}
	}
}

// guardRules lists the rules with a cookie (ours; the bridge's default flow has none).
func guardRules(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(dumpFlows(t), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "cookie=") && !strings.HasPrefix(l, "cookie=0x0,") {
			out = append(out, l)
		}
	}
	return out
}

// GC leaves the rules of the valid ports and none on a number a port has. (libcni's GC first
// DELs the cached attachments that are not valid; DEL leaves a port ADD numbered its rules, on a
// number no port has once it is gone. The plugin's own GC removes by cookie the rules of the
// ports it collects.)
func TestGCLeavesNoRulesOnALivePort(t *testing.T) {
	n := newNet(t, "1.1.0")
	n.withIPAM = false
	keep, drop := newPod(1102), newPod(1103)
	ofports := map[string]string{}
	for _, p := range []pod{keep, drop} {
		before := ports(t)
		n.mustAdd(p)
		t.Cleanup(func() { _ = n.del(p) })
		for _, port := range ports(t) {
			if !slices.Contains(before, port) {
				ofports[p.containerID] = waitOFPort(t, port)
			}
		}
	}
	gcArgs := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: keep.containerID, IfName: "net1"}}}
	if err := n.cni().GCNetworkList(context.Background(), n.confList(), gcArgs); err != nil {
		t.Fatalf("GC: %v", err)
	}
	on := func(ofport string) (n int) {
		for _, l := range guardRules(t) {
			if strings.Contains(l, "in_port="+ofport+",") || strings.Contains(l, "in_port="+ofport+" ") {
				n++
			}
		}
		return n
	}
	if k := on(ofports[keep.containerID]); k == 0 {
		t.Errorf("after GC: no rules on the valid port's ofport\n%s", dumpFlows(t))
	}
	p := ports(t)
	if len(p) != 1 {
		t.Fatalf("after GC: ports %v, want the valid one's", p)
	}
	assertNoGuardRules(t, p[0])
	n.mustDel(keep)
	assertNoGuardRules(t)
}

// OVS keeps OpenFlow rules only in ovs-vswitchd's memory: after ovs-vswitchd restarts (here with
// ovsdb-server too, as an OVS upgrade does) the port comes back from OVSDB without them. The
// flow keeper the CNI DaemonSet runs puts back exactly the rules ADD made, on the port's
// ofport, from OVSDB alone; and a pod sending with another MAC is dropped again. The keeper's
// period is an hour: what brings the rules back is its noticing the restart.
func TestFlowKeeperRestoresRulesAfterOVSRestart(t *testing.T) {
	logs := runKeeper(t)
	n, p := newNet(t, "1.1.0"), newPod(1104)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	made := ruleSet(t)
	if len(made) == 0 {
		t.Fatalf("no anti-spoofing rules after ADD:\n%s", dumpFlows(t))
	}
	if err := env.ovs.Restart(); err != nil {
		t.Fatalf("restart OVS: %v", err)
	}
	var back []string
	for range 600 { // a bound on a wait, not a timed assertion: the keeper is woken at once
		// Until ovs-vswitchd has made the bridge again, its management socket is missing.
		out, err := env.ovs.Ofctl("dump-flows", fmt.Sprintf("unix:%s/%s.mgmt", env.ovs.Dir, bridge))
		if back = rulesOf(out); err == nil && slices.Equal(back, made) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Equal(back, made) {
		t.Fatalf("the port's rules after the restart:\n%s\nwant those ADD made:\n%s", strings.Join(back, "\n"), strings.Join(made, "\n"))
	}
	port := ports(t)[0]
	ofport := vsctlGet(t, "Interface", port, "ofport")
	for _, l := range back {
		if !strings.Contains(l, "in_port="+ofport+",") && !strings.Contains(l, "in_port="+ofport+" ") {
			t.Errorf("rule not on the port's ofport %s: %s", ofport, l)
		}
	}
	if !strings.Contains(logs.String(), "re-applied the port's anti-spoofing flows") || !strings.Contains(logs.String(), port) {
		t.Errorf("the keeper did not log what it re-applied:\n%s", logs.String())
	}
	assertForgedDropped(t, filepath.Join(n.socketRoot(), p.uid), podDevInfo(t, n, p), "10.99.0.202/24")
}

// runKeeper runs a flow keeper with a period of an hour until the test ends, and returns its
// log, which the test prints when it fails.
func runKeeper(t *testing.T) fmt.Stringer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncWriter{w: &bytes.Buffer{}}
	log, err := logging.New(logs, logging.ComponentInstaller, logging.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := &flowkeeper.Keeper{OVSDB: env.ovs.DBSock(), Period: time.Hour, Retry: 100 * time.Millisecond, Log: log}
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("keeper log:\n%s", logs.String())
		}
	})
	return logs
}

// ruleSet is the bridge's rules with a cookie, without their counters and age, sorted: what
// the rules are, not what they did.
func ruleSet(t *testing.T) []string {
	t.Helper()
	return rulesOf(dumpFlows(t))
}

func rulesOf(dump string) []string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if l = strings.TrimSpace(l); !strings.HasPrefix(l, "cookie=") || strings.HasPrefix(l, "cookie=0x0,") {
			continue
		}
		var keep []string
		for _, f := range strings.Split(strings.ReplaceAll(l, " ", ","), ",") {
			if f == "" || strings.HasPrefix(f, "duration=") || strings.HasPrefix(f, "n_packets=") ||
				strings.HasPrefix(f, "n_bytes=") || strings.HasPrefix(f, "idle_age=") || strings.HasPrefix(f, "hard_age=") {
				continue
			}
			keep = append(keep, f)
		}
		out = append(out, strings.Join(keep, ","))
	}
	slices.Sort(out)
	return out
}

// syncWriter lets the keeper's goroutine log while the test reads the buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// String is what was written so far; the keeper may still be writing.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// CHECK counts the port's rules on the bridge (OpenFlow, not ovs-ofctl): all there passes; with
// them gone, as after an ovs-vswitchd restart without the keeper, it fails naming the port and
// the keeper. The port records the MAC its rules pass, which is what the keeper rebuilds from.
func TestCheckFailsWhenTheRulesAreGone(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1105)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	port := ports(t)[0]
	if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
		t.Fatalf("CHECK after ADD: %v", err)
	}
	if got, want := vsctlGet(t, "Interface", port, "external_ids:kube-fstack.io/mac"), podDevInfo(t, n, p).MAC; !strings.EqualFold(strings.Trim(got, `"`), want) {
		t.Errorf("the port records MAC %s, the device info has %s", got, want)
	}
	all := len(ruleSet(t))
	catchAll := "table=0,priority=10,in_port=" + vsctlGet(t, "Interface", port, "ofport") // the port's first stage's last rule
	if out, err := env.ovs.Ofctl("--strict", "del-flows", fmt.Sprintf("unix:%s/%s.mgmt", env.ovs.Dir, bridge), catchAll); err != nil {
		t.Fatalf("ovs-ofctl del-flows: %v: %s", err, out)
	}
	err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt())
	if err == nil || !strings.Contains(err.Error(), port) || !strings.Contains(err.Error(), fmt.Sprintf("%d of its %d anti-spoofing rules", all-1, all)) || !strings.Contains(err.Error(), "keepFlows") {
		t.Fatalf("CHECK with a rule gone: %v", err)
	}
}
