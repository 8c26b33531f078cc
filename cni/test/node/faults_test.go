package node

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A node rebooted: /var/run (the socket root, the device info) was a tmpfs and is empty, but
// OVS's database is on disk and keeps the ports of the sandboxes that died with the node, whose
// DEL never comes (the runtime's cache and host-local's leases are on disk too). The pods' new
// sandboxes (new container IDs, same pod UIDs) get the same socket paths: the next ADD of a
// pod's interface removes the old port on its socket, and the plugin's GC removes the rest.
func TestPortsOfANodeThatLostItsTmpfs(t *testing.T) {
	n := newNet(t, "1.1.0")
	a, b := newPod(810), newPod(811)
	n.mustAdd(a)
	n.mustAdd(b)
	t.Cleanup(func() { _ = n.del(a); _ = n.del(b) }) // when the test fails half-way
	for _, dir := range []string{n.socketRoot(), n.deviceInfoDir()} {
		must(t, os.RemoveAll(dir))
	}
	oldA, oldB := portOf(t, a), portOf(t, b)

	again := a
	again.containerID = fmt.Sprintf("beef%060d", 810)
	n.mustAdd(again)
	t.Cleanup(func() { _ = n.del(again) })
	if got := ports(t); slices.Contains(got, oldA) || !slices.Contains(got, oldB) || len(got) != 2 {
		t.Fatalf("after the new sandbox's ADD, ports %v: the old sandbox's %s must be gone, %s and the new one left", got, oldA, oldB)
	}
	// The plugin's own GC, without libcni's DELs of the attachments in its cache.
	conf := n.pluginConf()
	conf["cniVersion"], conf["name"] = n.version, n.name
	conf["cni.dev/valid-attachments"] = []map[string]string{{"containerID": again.containerID, "ifname": again.ifname}}
	delete(conf, "ipam") // host-local has no GC: libcni's DELs below give its leases back
	stdin, _ := json.Marshal(conf)
	if out, err := execPlugin("GC", stdin, "", pod{}); err != nil {
		t.Fatalf("GC: %v %s", err, out)
	}
	if got := ports(t); len(got) != 1 || got[0] != portOf(t, again) {
		t.Fatalf("after GC, ports %v, want only %s", got, portOf(t, again))
	}
	n.gc(again)
	if got := ipamLeases(n.ipamDir()); len(got) != 1 {
		t.Fatalf("after libcni's GC, leases %v, want the new sandbox's", got)
	}
	n.mustDel(again)
	n.assertNothingLeft()
}

// portOf is the name of p's port in OVS ("" when there is none).
func portOf(t *testing.T, p pod) string {
	t.Helper()
	out, err := env.ovs.Vsctl("--no-headings", "--format=csv", "--columns=name", "find", "Interface",
		"external_ids:kube-fstack.io/container-id="+p.containerID)
	if err != nil {
		t.Fatal(err)
	}
	return trimCSV(out)
}

func trimCSV(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '"') {
		s = s[:len(s)-1]
	}
	for len(s) > 0 && s[0] == '"' {
		s = s[1:]
	}
	return s
}

// OVS (ovsdb-server and ovs-vswitchd) is killed and restarted twice while pods come and go. A
// runtime retries what fails (a failed ADD is followed by its DEL, as kubelet does), and once
// every pod is gone nothing is left: no port, no directory, no device info, no lease.
func TestOVSRestartedWhilePodsComeAndGo(t *testing.T) {
	n := newNet(t, "1.1.0")
	const pods = 6
	c := &churn{n: n, errs: make(chan error, pods), stop: make(chan struct{}), cycles: make([]atomic.Int64, pods), exited: make([]atomic.Bool, pods)}
	for i := range pods {
		p := newPod(820 + i)
		c.wg.Go(func() { c.cycle(i, p) })
	}
	// Every pod completes cycles before, between and after the restarts.
	c.waitCycles()
	for range 2 {
		if err := env.ovs.Restart(); err != nil {
			close(c.stop)
			c.wg.Wait()
			t.Fatalf("restart OVS: %v", err)
		}
		c.waitCycles()
	}
	close(c.stop)
	c.wg.Wait()
	close(c.errs)
	for err := range c.errs {
		if err != nil {
			t.Error(err)
		}
	}
	n.assertNothingLeft()
}

// churn is pods coming and going, each in a goroutine of its own, until stop closes.
type churn struct {
	n      *netw
	wg     sync.WaitGroup
	errs   chan error
	stop   chan struct{}
	cycles []atomic.Int64
	exited []atomic.Bool
}

// cycle ADDs and DELs pod i as a runtime does, retrying what fails, until stop closes (then
// a last DEL) or a retry gives up.
func (c *churn) cycle(i int, p pod) {
	n := c.n
	defer c.exited[i].Store(true)
	for {
		select {
		case <-c.stop:
			c.errs <- n.retry("DEL", p, n.del)
			return
		default:
		}
		if err := n.retry("ADD", p, func(p pod) error { _, err := n.add(p); return n.delAfterFailedAdd(p, err) }); err != nil {
			c.errs <- err
			return
		}
		if err := n.retry("DEL", p, n.del); err != nil {
			c.errs <- err
			return
		}
		c.cycles[i].Add(1)
	}
}

// waitCycles waits until every pod still cycling has completed two more cycles.
func (c *churn) waitCycles() {
	start := make([]int64, len(c.cycles))
	for i := range c.cycles {
		start[i] = c.cycles[i].Load()
	}
	for i := range c.cycles {
		for c.cycles[i].Load() < start[i]+2 && !c.exited[i].Load() {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// delAfterFailedAdd is the runtime's reaction to a failed ADD: DEL the attachment before any
// retry. It returns the ADD's error, so the ADD is retried.
func (n *netw) delAfterFailedAdd(p pod, addErr error) error {
	if addErr != nil {
		_ = n.retry("DEL", p, n.del)
	}
	return addErr
}

// retry runs fn until it succeeds, as a runtime does; OVS down for good is the one way out.
func (n *netw) retry(what string, p pod, fn func(pod) error) error {
	var err error
	for range 500 {
		if err = fn(p); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // a runtime backs off too; OVS takes seconds to come back
	}
	return fmt.Errorf("%s of %s failed 500 times, last: %w", what, p.uid, err)
}
