package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/kube-fstack/kube-fstack/internal/nodetest"
)

type bench struct {
	bin string
	tmp string
	ovs *nodetest.OVS
}

// series is one way of making and removing an attachment, timed end to end.
type series struct {
	name  string
	cycle func(i int) error
	times []time.Duration
}

// latency runs the series round-robin, so machine noise hits all of them alike.
func (b *bench) latency(n int) error {
	all, cleanup, err := b.series()
	defer cleanup()
	if err != nil {
		return err
	}
	for i := range n {
		for _, s := range all {
			start := time.Now()
			if err := s.cycle(i); err != nil {
				return fmt.Errorf("%s #%d: %w", s.name, i, err)
			}
			s.times = append(s.times, time.Since(start))
		}
	}
	report(n, all)
	return nil
}

func (b *bench) series() ([]*series, func(), error) {
	podNS := "fsk-bench-pod"
	if err := nodetest.AddNetns(podNS); err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { nodetest.DelNetns(podNS) }
	fsk, bare := b.fstackNet("fstack", true), b.fstackNet("fstack-bare", false)
	bridge := b.bridgeNet()
	return []*series{
		{name: "fstack-cni + host-local", cycle: func(i int) error { return b.addDel(fsk, i, podNS) }},
		{name: "bridge + host-local", cycle: func(i int) error { return b.addDel(bridge, i, podNS) }},
		{name: "fstack-cni (no IPAM)", cycle: func(i int) error { return b.addDel(bare, i, podNS) }},
		{name: "ovs-vsctl exec", cycle: func(i int) error { return b.vsctl(i, false) }},
		{name: "ovs-vsctl exec --no-wait", cycle: func(i int) error { return b.vsctl(i, true) }},
	}, cleanup, nil
}

func (b *bench) ipam(name string) map[string]any {
	return map[string]any{"type": "host-local", "subnet": "10.98.0.0/16", "dataDir": filepath.Join(b.tmp, "ipam-"+name)}
}

func (b *bench) fstackNet(name string, withIPAM bool) *libcni.NetworkConfigList {
	conf := map[string]any{"type": "fstack-cni", "bridge": b.ovs.Bridge, "ovsdbSocket": b.ovs.DBSock(),
		"socketRoot": filepath.Join(b.tmp, "vhost"), "deviceInfoDir": filepath.Join(b.tmp, "devinfo"),
		"logFile": filepath.Join(b.tmp, "fstack-cni.log")}
	if withIPAM {
		conf["ipam"] = b.ipam(name)
	}
	return mustList(name, conf)
}

// bridgeNet is the reference: a veth into the pod's netns and a Linux bridge. The bench runs
// in a network namespace of its own (hack/bench-cni.sh), so that bridge is not on the host.
func (b *bench) bridgeNet() *libcni.NetworkConfigList {
	return mustList("bridge", map[string]any{"type": "bridge", "bridge": "fskbench0", "ipam": b.ipam("bridge")})
}

func mustList(name string, plugin map[string]any) *libcni.NetworkConfigList {
	raw, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": name, "plugins": []any{plugin}})
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		panic(err)
	}
	return list
}

func (b *bench) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{b.bin}, filepath.Join(b.tmp, "cache"), nil)
}

func podRT(i int, netns string) *libcni.RuntimeConf {
	uid := fmt.Sprintf("be4c0000-0000-4000-8000-%012d", i)
	return &libcni.RuntimeConf{ContainerID: fmt.Sprintf("bench%059d", i), NetNS: nodetest.NetnsPath(netns), IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", "p"}, {"K8S_POD_UID", uid}}}
}

func (b *bench) addDel(list *libcni.NetworkConfigList, i int, netns string) error {
	ctx, rt := context.Background(), podRT(i, netns)
	if _, err := b.cni().AddNetworkList(ctx, list, rt); err != nil {
		return err
	}
	return b.cni().DelNetworkList(ctx, list, rt)
}

// vsctl makes the same port the way userspace-cni does: one ovs-vsctl exec to add, one to
// delete (by default ovs-vsctl waits until ovs-vswitchd has applied the change).
func (b *bench) vsctl(i int, noWait bool) error {
	name := fmt.Sprintf("vsc%d", i)
	var pre []string
	if noWait {
		pre = []string{"--no-wait"}
	}
	sock := filepath.Join(b.tmp, "vhost", name+".sock")
	add := slices.Concat(pre, []string{"add-port", b.ovs.Bridge, name, "--", "set", "Interface", name, "type=dpdkvhostuserclient",
		"options:vhost-server-path=" + sock, "external_ids:kube-fstack.io/owner=bench"})
	if _, err := b.ovs.Vsctl(add...); err != nil {
		return err
	}
	_, err := b.ovs.Vsctl(append(pre, "del-port", b.ovs.Bridge, name)...)
	return err
}

func report(n int, all []*series) {
	fmt.Printf("ADD+DEL latency, %d attachments per series, round-robin in one run (absolute times are noisy; read the ratios)\n", n)
	fmt.Printf("  %-28s %10s %10s\n", "series", "p50", "p99")
	for _, s := range all {
		fmt.Printf("  %-28s %10s %10s\n", s.name, pct(s.times, 50), pct(s.times, 99))
	}
	ratio := func(a, b *series, p int) float64 { return float64(pct(a.times, p)) / float64(pct(b.times, p)) }
	fsk, bridge, bare, vs, vsNoWait := all[0], all[1], all[2], all[3], all[4]
	fmt.Printf("fstack-cni / bridge (both with host-local): p50 %.2fx, p99 %.2fx (goal <= 1.5x)\n", ratio(fsk, bridge, 50), ratio(fsk, bridge, 99))
	fmt.Printf("ovs-vsctl exec / fstack-cni (no IPAM):       p50 %.2fx, p99 %.2fx faster (goal >= 3x)\n", ratio(vs, bare, 50), ratio(vs, bare, 99))
	fmt.Printf("ovs-vsctl --no-wait / fstack-cni (no IPAM):  p50 %.2fx, p99 %.2fx faster\n", ratio(vsNoWait, bare, 50), ratio(vsNoWait, bare, 99))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	idx := (len(s)*p+99)/100 - 1
	return s[max(0, min(idx, len(s)-1))].Round(10 * time.Microsecond)
}
