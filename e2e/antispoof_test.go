package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

var nPackets = regexp.MustCompile(`n_packets=(\d+)`)

// checkPortGuarded: the pod's port carries fstack-cni's anti-spoofing rules, bound to the
// StackInstance's address, the dataplane's
// answers went through their pass rules (it sends with the device info's MAC, which the
// supervisor puts in the vdev) and none of its frames hit a drop rule.
func checkPortGuarded(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ports, err := env.PortsOfPod(string(p.UID))
	if err != nil || len(ports) != 1 {
		t.Fatalf("want one OVS port for pod %s, got %v (%v)", p.UID, ports, err)
	}
	ofport, err := env.Vsctl("get", "Interface", ports[0], "ofport")
	if err != nil {
		t.Fatal(err)
	}
	ofport = strings.TrimSpace(ofport)
	// The rules bind the StackInstance's address, which reached fstack-cni in the networks entry
	// (Multus) or the pod's binding annotation (chained, the pod-annotations capability).
	bound, err := env.Vsctl("get", "Interface", ports[0], "external_ids:kube-fstack.io/ips")
	if err != nil {
		t.Fatal(err)
	}
	served := servedAddr(t, p)
	if !slices.Contains(strings.Split(strings.Trim(strings.TrimSpace(bound), `"`), ","), served) {
		t.Fatalf("port %s binds addresses %s, not the pod's %s: did the runtime pass the pod's annotations (capability io.kubernetes.cri.pod-annotations in the conflist)?", ports[0], bound, served)
	}
	mgmt := filepath.Join(filepath.Dir(env.OVSDBSock), env.OVSBridge+".mgmt")
	out, err := exec.Command("ovs-ofctl", "dump-flows", "unix:"+mgmt, "in_port="+ofport).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl dump-flows: %v: %s", err, out)
	}
	var passed, dropped, rules int
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		m := nPackets.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "cookie=0x0,") {
			continue
		}
		rules++
		n, _ := strconv.Atoi(m[1])
		if strings.HasSuffix(l, "actions=drop") {
			dropped += n
		} else {
			passed += n
		}
	}
	if rules == 0 || passed == 0 || dropped != 0 {
		t.Fatalf("port %s (ofport %s): %d anti-spoofing rules, %d frames passed, %d dropped; want rules, passes, no drops:\n%s",
			ports[0], ofport, rules, passed, dropped, out)
	}
	t.Logf("port %s: %d anti-spoofing rules, %d of the dataplane's frames passed, none dropped", ports[0], rules, passed)
}

// checkRulesBackAfterOVSRestart: OVS keeps OpenFlow rules only in ovs-vswitchd's memory, so a
// restart (hack/cluster/ovs-restart.sh) brings the pod's port back from OVSDB without them; the
// CNI DaemonSet's flow keeper (installer container, chart value cni.keepFlows) puts back the
// very rules ADD made, on the port's ofport, within seconds. The pod stays; only OVS restarts.
func checkRulesBackAfterOVSRestart(t *testing.T, p *corev1.Pod) {
	t.Helper()
	// The step before restarted OVS too, and its /readyz and pings can be back before the
	// keeper's bundle is (without the rules the bridge forwards NORMAL): wait for that bundle,
	// which lands whole or not at all, before taking it as the rules to see again.
	var port string
	var before []string
	err := framework.Poll("the port's anti-spoofing rules back from the previous OVS restart", time.Minute, 500*time.Millisecond, func() (bool, string, error) {
		port, before = portRules(t, p)
		return len(before) > 0, fmt.Sprintf("port %s has no anti-spoofing rules", port), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	restartOVS(t)
	err = framework.Poll("the port's anti-spoofing rules back after the OVS restart", time.Minute, 500*time.Millisecond, func() (bool, string, error) {
		_, now := portRules(t, p)
		return slices.Equal(now, before), fmt.Sprintf("port %s: rules now\n%s\nwant\n%s", port, strings.Join(now, "\n"), strings.Join(before, "\n")), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("port %s: its %d anti-spoofing rules are back after the OVS restart", port, len(before))
}

// portRules lists the rules with a cookie on the pod's port's ofport, without counters and
// ages, sorted: what the rules are (their ofport included), not what they did. A bridge that
// is not answering yet has none.
func portRules(t *testing.T, p *corev1.Pod) (string, []string) {
	t.Helper()
	ports, err := env.PortsOfPod(string(p.UID))
	if err != nil || len(ports) != 1 {
		t.Fatalf("want one OVS port for pod %s, got %v (%v)", p.UID, ports, err)
	}
	ofport, err := env.Vsctl("get", "Interface", ports[0], "ofport")
	if err != nil {
		return ports[0], nil
	}
	mgmt := filepath.Join(filepath.Dir(env.OVSDBSock), env.OVSBridge+".mgmt")
	out, err := exec.Command("ovs-ofctl", "dump-flows", "unix:"+mgmt, "in_port="+strings.TrimSpace(ofport)).CombinedOutput()
	if err != nil {
		return ports[0], nil
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); !strings.HasPrefix(l, "cookie=") || strings.HasPrefix(l, "cookie=0x0,") {
			continue
		}
		var keep []string
		for _, f := range strings.Split(strings.ReplaceAll(l, " ", ","), ",") {
			if name, _, _ := strings.Cut(f, "="); f != "" && !slices.Contains([]string{"duration", "n_packets", "n_bytes", "idle_age", "hard_age"}, name) {
				keep = append(keep, f)
			}
		}
		rules = append(rules, strings.Join(keep, ","))
	}
	slices.Sort(rules)
	return ports[0], rules
}
