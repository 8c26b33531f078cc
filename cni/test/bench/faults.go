package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
)

// faults runs ADD/DEL cycles with the faults a node sees, behaving as a runtime does (a failed
// or killed ADD is followed by DEL; a failed DEL is retried) and as the kubelet does (the pod's
// emptyDir exists before ADD and is removed after the last DEL), and counts what leaked.
func (b *bench) faults(cycles int) error {
	root := filepath.Join(b.tmp, "faults")
	conf := map[string]any{"type": "fstack-cni", "bridge": b.ovs.Bridge, "ovsdbSocket": b.ovs.DBSock(),
		"socketRoot": filepath.Join(root, "vhost"), "deviceInfoDir": filepath.Join(root, "devinfo"),
		"kubeletRootDir": filepath.Join(root, "kubelet"), "logFile": filepath.Join(root, "fstack-cni.log"),
		"ipam": map[string]any{"type": "host-local", "subnet": "10.97.0.0/16", "dataDir": filepath.Join(root, "ipam")}}
	b.useNodeConfig(conf)
	list := mustList("faults", conf)
	plugin := map[string]any{"cniVersion": "1.1.0", "name": "faults"}
	for k, v := range conf {
		plugin[k] = v
	}
	stdin, _ := json.Marshal(plugin)
	counts := map[string]int{}
	for i := range cycles {
		rt := podRT(100000+i, "fsk-bench-pod")
		vol := podVolume(conf["kubeletRootDir"].(string), rt)
		if err := os.MkdirAll(vol, 0o755); err != nil {
			return err
		}
		kind, err := b.faultCycle(list, stdin, i, rt)
		if err != nil {
			return fmt.Errorf("cycle %d (%s): %w", i, kind, err)
		}
		if err := os.RemoveAll(filepath.Dir(filepath.Dir(filepath.Dir(vol)))); err != nil { // the kubelet removes the pod's volumes
			return err
		}
		counts[kind]++
	}
	return b.reportLeaks(root, cycles, counts)
}

// podVolume is the pod's emptyDir fstack-vhost under the kubelet root dir.
func podVolume(kubeletRoot string, rt *libcni.RuntimeConf) string {
	uid := ""
	for _, kv := range rt.Args {
		if kv[0] == "K8S_POD_UID" {
			uid = kv[1]
		}
	}
	return filepath.Join(kubeletRoot, "pods", uid, "volumes", "kubernetes.io~empty-dir", "fstack-vhost")
}

func (b *bench) faultCycle(list *libcni.NetworkConfigList, stdin []byte, i int, rt *libcni.RuntimeConf) (string, error) {
	ctx := context.Background()
	switch {
	case i%100 == 50:
		done := make(chan error, 1)
		go func() { done <- b.ovs.Restart() }()
		_, _ = b.cni().AddNetworkList(ctx, list, rt) // may fail: OVSDB is going away
		if err := <-done; err != nil {
			return "OVS restarted mid-ADD", err
		}
		return "OVS restarted mid-ADD", b.delUntilDone(list, rt)
	case i%10 == 1:
		if _, err := b.cni().AddNetworkList(ctx, list, rt); err != nil {
			return "DEL twice", err
		}
		if err := b.delUntilDone(list, rt); err != nil {
			return "DEL twice", err
		}
		return "DEL twice", b.delUntilDone(list, rt)
	case i%10 == 2:
		return "DEL without ADD", b.delUntilDone(list, rt)
	case i%10 == 3:
		b.killedAdd(stdin, rt)
		return "killed ADD", b.delUntilDone(list, rt)
	}
	if _, err := b.cni().AddNetworkList(ctx, list, rt); err != nil {
		return "plain", err
	}
	return "plain", b.delUntilDone(list, rt)
}

// delUntilDone retries like kubelet does; the bound only keeps a broken build from spinning.
func (b *bench) delUntilDone(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	var err error
	for range 200 {
		if err = b.cni().DelNetworkList(context.Background(), list, rt); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// killedAdd SIGKILLs an ADD at a random point of its run.
func (b *bench) killedAdd(stdin []byte, rt *libcni.RuntimeConf) {
	cmd := exec.Command(filepath.Join(b.bin, "fstack-cni"))
	args := make([]string, 0, len(rt.Args))
	for _, kv := range rt.Args {
		args = append(args, kv[0]+"="+kv[1])
	}
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + rt.ContainerID, "CNI_NETNS=" + rt.NetNS,
		"CNI_IFNAME=" + rt.IfName, "CNI_PATH=" + b.bin, "CNI_ARGS=" + strings.Join(args, ";")}
	cmd.Stdin = strings.NewReader(string(stdin))
	if cmd.Start() != nil {
		return
	}
	time.Sleep(time.Duration(rand.IntN(15000)) * time.Microsecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

func (b *bench) reportLeaks(root string, cycles int, counts map[string]int) error {
	out, err := b.ovs.Vsctl("--no-headings", "--columns=name", "find", "Interface", "external_ids:kube-fstack.io/network=faults")
	if err != nil {
		return err
	}
	leakedPorts := len(strings.Fields(out))
	dirs := append(podDirs(filepath.Join(root, "vhost")), leftIn(filepath.Join(root, "kubelet", "pods"))...)
	devinfos, _ := os.ReadDir(filepath.Join(root, "devinfo"))
	leases, _ := filepath.Glob(filepath.Join(root, "ipam", "*", "10.*"))
	fmt.Printf("fault run: %d ADD/DEL cycles %v\n", cycles, counts)
	fmt.Printf("  leaked: ports=%d links/directories=%d device-info files=%d IPAM leases=%d\n", leakedPorts, len(dirs), len(devinfos), len(leases))
	if leakedPorts+len(dirs)+len(devinfos)+len(leases) != 0 {
		return fmt.Errorf("the fault run leaked:%s", leakDetails(out, dirs, devinfos, leases))
	}
	return nil
}

// leakDetails names what leaked; a lease file holds its container ID, whose number is the cycle.
func leakDetails(ports string, dirs, devinfos []os.DirEntry, leases []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, " ports %q", strings.Fields(ports))
	for _, e := range append(dirs, devinfos...) {
		fmt.Fprintf(&b, " %s", e.Name())
	}
	for _, l := range leases {
		owner, _ := os.ReadFile(l)
		fmt.Fprintf(&b, " lease %s of %q", filepath.Base(l), strings.Fields(string(owner)))
	}
	return b.String()
}

// leftIn lists dir's entries (none once the kubelet removed every pod's volumes).
func leftIn(dir string) []os.DirEntry {
	all, _ := os.ReadDir(dir)
	return all
}

// podDirs lists the socket root without the node-wide IPAM lock file the plugin keeps there.
func podDirs(root string) []os.DirEntry {
	all, _ := os.ReadDir(root)
	dirs := make([]os.DirEntry, 0, len(all))
	for _, e := range all {
		if e.Name() != plugin.IPAMLockFile {
			dirs = append(dirs, e)
		}
	}
	return dirs
}
