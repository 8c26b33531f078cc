package dpdk

import (
	"strings"
	"syscall"
	"testing"
)

// multiProcArgs make testpmd a two-process application like F-Stack: each process polls its
// own queue pair of the shared port; the secondary gets F-Stack's secondary EAL argv.
func multiProcArgs() []string {
	var args []string
	for _, a := range []string{"--rxq=2", "--txq=2", "--num-procs={procs}", "--proc-id={proc}"} {
		args = append(args, "--primary-args="+a, "--secondary-args="+a)
	}
	// The secondary receives only: testpmd gives each process its own queues (proc_id * rxq /
	// num_procs) in every forwarding mode but icmpecho, where every process polls every queue;
	// two processes polling one virtio queue corrupt it ("vring descriptor with no mbuf cookie",
	// and the port receives nothing again: about 1 run in 40 under load). F-Stack gives process k
	// queue k. The primary (icmpecho) answers the pings.
	return append(args, "--secondary-args=--forward-mode=rxonly", "--secondary-args=--auto-start")
}

// Two processes: the secondary starts only after the primary is ready, pings get through, and a
// dead secondary stops the dataplane with an error naming it.
func TestTwoProcessesAndADeadSecondary(t *testing.T) {
	p := newPod(t, "fsdp3", "10.99.7.12", 2)
	d := p.startDataplane(t, "0-1", multiProcArgs()...)
	d.waitReady(t)
	log := d.readable()
	if !strings.Contains(log, "dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary --vdev=virtio_user0,path=/var/run/kube-fstack/vhost/net1.sock,server=1,queues=2") {
		t.Errorf("the secondary did not get F-Stack's secondary EAL argv on CPU 1:\n%s", log)
	}
	if !d.startedBefore(t, "process is up", 0, 1) {
		t.Errorf("the secondary started before the primary was ready:\n%s", log)
	}
	peer := addVethPeer(t, "10.99.7.202/24")
	pingThrough(t, peer, p.ip)

	pids := d.pidsOf("dpdk-testpmd")
	if len(pids) != 2 {
		t.Fatalf("want 2 testpmd processes, got %v", pids)
	}
	must(t, syscall.Kill(pids[1], syscall.SIGKILL)) // the later-started one: the secondary
	d.waitGeneration(t, p, "2")
	if !strings.Contains(d.readable(), "F-Stack process 1 (secondary) exited: killed by signal killed") {
		t.Errorf("the log does not name the secondary:\n%s", d.log())
	}
}
