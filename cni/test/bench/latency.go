package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

type bench struct {
	bin string
	// bases are other builds of fstack-cni (each a dir with it and host-local), measured in the
	// same run as three more series each (see baseSeries).
	bases []base
	tmp   string
	run   string // a tmpfs for the attachments' directories and device info, as /var/run is on nodes
	ovs   *nodetest.OVS
	// nodeConfig is the node config the bench's fstack-cni builds read (NodeConfigLDFlag).
	nodeConfig string
}

// useNodeConfig writes the node config of a network whose node paths conf names (the network
// config keeps naming them, with the node's values, so base builds from before the node config
// get the same paths), serving the bench pods' namespace.
func (b *bench) useNodeConfig(conf map[string]any) {
	str := func(k string) string { s, _ := conf[k].(string); return s }
	node := &nodeconf.Conf{OVSDBSocket: str("ovsdbSocket"), SocketRoot: str("socketRoot"), KubeletRootDir: str("kubeletRootDir"),
		DeviceInfoDir: str("deviceInfoDir"), LogFile: str("logFile"), Namespaces: []string{benchNamespace}}
	data, err := node.Encode()
	if err == nil {
		err = fsutil.WriteAtomic(b.nodeConfig, data, 0o644)
	}
	if err != nil {
		panic(err)
	}
}

// benchNamespace is the bench pods' K8S_POD_NAMESPACE.
const benchNamespace = "bench"

// series is one way of making and removing an attachment, timed end to end.
type series struct {
	name  string
	cycle func(i int) error
	times []time.Duration
	// cpu is the CPU time (user and system) of the processes a cycle ran and reaped: the plugin,
	// its IPAM child, ovs-vsctl. Not ovsdb-server or ovs-vswitchd, which run on. Far less
	// disturbed by the other tenants than the wall time, so it tells two builds apart better.
	cpu []time.Duration
	// kubelet, for a series of fstack-cni, is the kubelet root dir its pods' emptyDir is under:
	// each cycle's pod gets it before the cycle, as the kubelet makes it before it asks for the
	// sandbox, and loses it after, as the kubelet removes it with the pod; neither is timed (no
	// runtime's ADD or DEL does it).
	kubelet string
}

// makeVolume gives cycle i's pod its emptyDir when s's plugin needs one.
func (s *series) makeVolume(i int) error {
	if s.kubelet == "" {
		return nil
	}
	return os.MkdirAll(podVolume(s.kubelet, podRT(i, "")), 0o755)
}

// removeVolume removes cycle i's pod directory, as the kubelet does once the pod is gone.
func (s *series) removeVolume(i int) error {
	if s.kubelet == "" {
		return nil
	}
	return os.RemoveAll(filepath.Join(s.kubelet, "pods", podUID(i)))
}

// latency runs every series once per round, so machine noise hits all of them alike, in a new
// order every round (from a fixed seed), so no series always follows the same one: work a
// series leaves to the kernel or to ovs-vswitchd lands on whichever comes next. The bridge
// plugin's DEL leaves the most (veth and netns device teardown); with a fixed order the series
// after it, the same fstack-cni series run again after the do-nothing one in the same run,
// measured 11.3 against 8.3 ms p50.
func (b *bench) latency(n int) error {
	all, cleanup, err := b.series()
	defer cleanup()
	if err != nil {
		return err
	}
	unpin, err := b.residentPort()
	if err != nil {
		return err
	}
	defer unpin()
	rng := rand.New(rand.NewPCG(1, 1))
	order := make([]*series, len(all))
	for i := range n {
		copy(order, all)
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, s := range order {
			if err := s.makeVolume(i); err != nil {
				return err
			}
			cpu0, start := childrenCPU(), time.Now()
			if err := s.cycle(i); err != nil {
				return fmt.Errorf("%s #%d: %w", s.name, i, err)
			}
			s.times = append(s.times, time.Since(start))
			s.cpu = append(s.cpu, childrenCPU()-cpu0)
			if err := s.removeVolume(i); err != nil {
				return err
			}
		}
	}
	report(n, all)
	return nil
}

// residentPort keeps one vhost-user port on the bridge while the series run, as a node's NIC
// port or its running pods do. On an empty bridge ovs-vswitchd creates a PMD thread for every
// ADD and destroys it for every DEL, work that no real node does per attachment and that would
// land on whichever series happens to run next.
func (b *bench) residentPort() (func(), error) {
	const name = "fskresident"
	sock := filepath.Join(b.tmp, name+".sock")
	if _, err := b.ovs.Vsctl("add-port", b.ovs.Bridge, name, "--", "set", "Interface", name,
		"type=dpdkvhostuserclient", "options:vhost-server-path="+sock); err != nil {
		return nil, err
	}
	return func() { _, _ = b.ovs.Vsctl("--if-exists", "del-port", b.ovs.Bridge, name) }, nil
}

func (b *bench) series() ([]*series, func(), error) {
	podNS := "fsk-bench-pod"
	if err := nodetest.AddNetns(podNS); err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { nodetest.DelNetns(podNS) }
	fsk, bare := b.fstackNet("fstack", true), b.fstackNet("fstack-bare", false)
	vsc, vscNoWait := b.vsctlNet("vsctl", false), b.vsctlNet("vsctl-nowait", true)
	bridge := b.bridgeNet()
	var base []*series
	for _, bb := range b.bases {
		base = append(base, b.baseSeries(bb, podNS)...)
	}
	return append([]*series{
		{name: "fstack-cni + host-local", cycle: func(i int) error { return b.addDel(fsk, i, podNS) }, kubelet: b.kubeletRoot()},
		{name: "bridge + host-local", cycle: func(i int) error { return b.addDel(bridge, i, podNS) }},
		{name: "fstack-cni (no IPAM)", cycle: func(i int) error { return b.addDel(bare, i, podNS) }, kubelet: b.kubeletRoot()},
		{name: "vsctl-cni --no-wait", cycle: func(i int) error { return b.addDel(vscNoWait, i, podNS) }},
		{name: "vsctl-cni (waits)", cycle: func(i int) error { return b.addDel(vsc, i, podNS) }},
		{name: "bare ovs-vsctl --no-wait x2", cycle: func(i int) error { return b.vsctl(i) }},
		{name: "fstack-cni VERSION x2", cycle: func(int) error { return b.version(b.bin) }},
	}, base...), cleanup, nil
}

// base is another build of fstack-cni: label names it in the report, bin is its dir.
type base struct{ label, bin string }

// baseSeries are the series of fstack-cni that tell two builds apart (with and without IPAM,
// and two do-nothing starts), run from another build: the A/B of a change to the plugin,
// interleaved with everything else, so both builds meet the same machine noise.
func (b *bench) baseSeries(bb base, podNS string) []*series {
	fsk, bare := b.fstackNet(bb.label+"-fstack", true), b.fstackNet(bb.label+"-fstack-bare", false)
	return []*series{
		{name: bb.label + ": + host-local", cycle: func(i int) error { return b.addDelIn(bb.bin, fsk, i, podNS) }, kubelet: b.kubeletRoot()},
		{name: bb.label + ": (no IPAM)", cycle: func(i int) error { return b.addDelIn(bb.bin, bare, i, podNS) }, kubelet: b.kubeletRoot()},
		{name: bb.label + ": VERSION x2", cycle: func(int) error { return b.version(bb.bin) }},
	}
}

func (b *bench) ipam(name string) map[string]any {
	return map[string]any{"type": "host-local", "subnet": "10.98.0.0/16", "dataDir": filepath.Join(b.tmp, "ipam-"+name)}
}

func (b *bench) fstackNet(name string, withIPAM bool) *libcni.NetworkConfigList {
	conf := map[string]any{"type": "fstack-cni", "bridge": b.ovs.Bridge, "ovsdbSocket": b.ovs.DBSock(),
		"socketRoot": filepath.Join(b.run, "vhost"), "deviceInfoDir": filepath.Join(b.run, "devinfo"),
		"kubeletRootDir": b.kubeletRoot(), "logFile": filepath.Join(b.tmp, "fstack-cni.log")}
	if withIPAM {
		conf["ipam"] = b.ipam(name)
	}
	b.useNodeConfig(conf)
	return mustList(name, conf)
}

// bridgeNet is the reference: a veth into the pod's netns and a Linux bridge. The bench runs
// in a network namespace of its own (hack/bench-cni.sh), so that bridge is not on the host.
func (b *bench) bridgeNet() *libcni.NetworkConfigList {
	return mustList("bridge", map[string]any{"type": "bridge", "bridge": "fskbench0", "ipam": b.ipam("bridge")})
}

// vsctlNet is the exec baseline (cni/test/bench/vsctl-cni): the same attachment as fstack-cni
// without IPAM, made by a plugin process that execs ovs-vsctl.
func (b *bench) vsctlNet(name string, noWait bool) *libcni.NetworkConfigList {
	return mustList(name, map[string]any{"type": "vsctl-cni", "bridge": b.ovs.Bridge, "ovsdbSocket": b.ovs.DBSock(),
		"socketRoot": filepath.Join(b.run, "vhost"), "deviceInfoDir": filepath.Join(b.run, "devinfo"), "noWait": noWait})
}

func mustList(name string, plugin map[string]any) *libcni.NetworkConfigList {
	raw, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": name, "plugins": []any{plugin}})
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		panic(err)
	}
	return list
}

func (b *bench) cni() *libcni.CNIConfig { return b.cniIn(b.bin) }

func (b *bench) cniIn(bin string) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(b.tmp, "cache"), nil)
}

// kubeletRoot is the bench's stand-in for the kubelet's --root-dir (on disk, as /var/lib/kubelet
// is on nodes): fstack-cni finds each pod's emptyDir beneath it.
func (b *bench) kubeletRoot() string { return filepath.Join(b.tmp, "kubelet") }

func podUID(i int) string { return fmt.Sprintf("be4c0000-0000-4000-8000-%012d", i) }

func podRT(i int, netns string) *libcni.RuntimeConf {
	uid := podUID(i)
	return &libcni.RuntimeConf{ContainerID: fmt.Sprintf("bench%059d", i), NetNS: nodetest.NetnsPath(netns), IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", benchNamespace}, {"K8S_POD_NAME", "p"}, {"K8S_POD_UID", uid}}}
}

func (b *bench) addDel(list *libcni.NetworkConfigList, i int, netns string) error {
	return b.addDelIn(b.bin, list, i, netns)
}

func (b *bench) addDelIn(bin string, list *libcni.NetworkConfigList, i int, netns string) error {
	ctx, rt, cni := context.Background(), podRT(i, netns), b.cniIn(bin)
	if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
		return err
	}
	return cni.DelNetworkList(ctx, list, rt)
}

// vsctl is the exec approach with nothing around it: the two ovs-vsctl runs vsctl-cni makes,
// from this process, with no plugin process and no files. No plugin that execs ovs-vsctl can
// be faster than this.
func (b *bench) vsctl(i int) error {
	name := fmt.Sprintf("vsc%d", i)
	sock := filepath.Join(b.run, "vhost", name+".sock")
	if _, err := b.ovs.Vsctl("--no-wait", "add-port", b.ovs.Bridge, name, "--", "set", "Interface", name,
		"type=dpdkvhostuserclient", "options:vhost-server-path="+sock, "external_ids:kube-fstack.io/owner=bench"); err != nil {
		return err
	}
	_, err := b.ovs.Vsctl("--no-wait", "del-port", b.ovs.Bridge, name)
	return err
}

// version runs fstack-cni twice doing nothing (CNI_COMMAND=VERSION): the part of an ADD+DEL
// that is process start-up and exit, the floor under any Go plugin the runtime execs. The exec
// baseline pays it too, plus its ovs-vsctl runs, so vsctl-cni / this is the best ratio
// fstack-cni could show if its own work took no time.
func (b *bench) version(bin string) error {
	for range 2 {
		cmd := exec.Command(filepath.Join(bin, "fstack-cni"))
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("VERSION: %w: %s", err, out)
		}
	}
	return nil
}

func report(n int, all []*series) {
	fmt.Printf("ADD+DEL latency, %d attachments per series, interleaved in one run, shuffled order (absolute times are noisy; read the ratios)\n", n)
	fmt.Printf("  %-30s %10s %10s %10s %10s\n", "series", "p50", "p99", "min", "CPU p50")
	for _, s := range all {
		fmt.Printf("  %-30s %10s %10s %10s %10s\n", s.name, pct(s.times, 50), pct(s.times, 99), pct(s.times, 0), pct(s.cpu, 50))
	}
	ratio := func(a, b *series, p int) float64 { return float64(pct(a.times, p)) / float64(pct(b.times, p)) }
	line := func(what string, a, b *series, tail string) {
		fmt.Printf("%-56s p50 %.2fx, p99 %.2fx%s\n", what+":", ratio(a, b, 50), ratio(a, b, 99), tail)
	}
	fsk, bridge, bare, vscNoWait, vsc, vsctl, floor := all[0], all[1], all[2], all[3], all[4], all[5], all[6]
	line("fstack-cni / bridge (both with host-local)", fsk, bridge, " (goal <= 1.5x)")
	line("vsctl-cni --no-wait / fstack-cni (neither waits)", vscNoWait, bare, " faster (goal >= 3x)")
	line("vsctl-cni waiting (userspace-cni) / fstack-cni", vsc, bare, " faster")
	line("bare ovs-vsctl x2, no plugin process / fstack-cni", vsctl, bare, " faster")
	line("ceiling: vsctl-cni --no-wait / fstack-cni VERSION x2", vscNoWait, floor, " (fstack-cni doing nothing)")
	fmt.Printf("%-56s %.0f%% of p50\n", "process start-up and exit in fstack-cni's ADD+DEL:", 100*ratio(floor, bare, 50))
	fmt.Printf("%-56s %.2fx (context only: the least disturbed cycle)\n", "vsctl-cni --no-wait / fstack-cni at min:", ratio(vscNoWait, bare, 0))
	for i := 7; i+3 <= len(all); i += 3 {
		for k, what := range []string{"+ host-local", "(no IPAM)", "VERSION x2"} {
			this, base := []*series{fsk, bare, floor}[k], all[i+k]
			label, _, _ := strings.Cut(base.name, ":")
			line("this build / "+label+", "+what, this, base,
				fmt.Sprintf(", CPU p50 %.2fx", float64(pct(this.cpu, 50))/float64(pct(base.cpu, 50))))
		}
	}
}

// childrenCPU is the CPU time of every child process reaped so far.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	idx := (len(s)*p+99)/100 - 1
	return s[max(0, min(idx, len(s)-1))].Round(10 * time.Microsecond)
}
