package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

// checkOVSRestartLeaksNothing: the node's OVS is restarted while the workload's first pod is
// being set up and again while it is replaced, so fstack-cni's ADD and DEL meet an OVSDB that is
// gone and come back (the kubelet retries them). Once the workload is deleted, OVS, the socket
// root and fstack-cni's IPAM hold exactly what they held before: no port, pod directory or lease
// leaked. In between, OVS is restarted once more under the serving replacement pod, whose port
// must go unready and reconnect in place (checkOVSRestartWhileServing).
func checkOVSRestartLeaksNothing(t *testing.T) {
	if env.OVSRestart == "" || env.IPAMDir == "" {
		t.Skip("E2E_OVS_RESTART/E2E_IPAM_DIR are unset: this cluster's OVS is the host's own (kind), which the suite does not restart; hack/e2e.sh sets them for the local cluster")
	}
	before := readNodeState(t)
	mustApply(t, workload())
	restartOVS(t)
	first := waitAppPod(t, "")
	restarted := make(chan error, 1)
	go func() { restarted <- runOVSRestart() }()
	if err := env.Client.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	second := waitAppPod(t, string(first.UID))
	checkPortConnected(t, second)
	checkOVSRestartWhileServing(t, second)
	checkRulesBackAfterOVSRestart(t, second)
	if _, err := env.Kubectl("delete", "deployment", appName, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	waitPodResourcesGone(t, first)
	waitPodResourcesGone(t, second)
	err := framework.Poll("the node's OVS ports, pod directories and leases as before", 2*time.Minute, time.Second, func() (bool, string, error) {
		now := readNodeState(t)
		return now.equal(before), fmt.Sprintf("before %+v, now %+v", before, now), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func restartOVS(t *testing.T) {
	t.Helper()
	if err := runOVSRestart(); err != nil {
		t.Fatal(err)
	}
}

func runOVSRestart() error {
	out, err := exec.Command(env.OVSRestart).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", env.OVSRestart, err, out)
	}
	return nil
}

// nodeState is what fstack-cni leaves on the node for the pods that exist.
type nodeState struct {
	Ports, Dirs, Leases []string
}

func (s nodeState) equal(o nodeState) bool {
	return slices.Equal(s.Ports, o.Ports) && slices.Equal(s.Dirs, o.Dirs) && slices.Equal(s.Leases, o.Leases)
}

func readNodeState(t *testing.T) nodeState {
	t.Helper()
	out, err := env.Vsctl("--timeout=10", "list-ports", env.OVSBridge)
	if err != nil {
		t.Fatal(err)
	}
	return nodeState{Ports: sorted(strings.Fields(out)), Dirs: dirNames(t, env.SocketRoot, nil),
		// host-local keeps one file per leased address, plus its lock and its cursor.
		Leases: dirNames(t, env.IPAMDir, func(name string) bool {
			return name != "lock" && !strings.HasPrefix(name, "last_reserved_ip")
		})}
}

func dirNames(t *testing.T, dir string, keep func(string) bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if keep == nil || keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return sorted(names)
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
