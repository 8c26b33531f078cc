package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var nPackets = regexp.MustCompile(`n_packets=(\d+)`)

// checkPortGuarded: the pod's port carries fstack-cni's anti-spoofing rules, the dataplane's
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
