package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/e2e/deviceplugin"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// The SR-IOV path through the real kubelet. The SR-IOV device plugin cannot run here (no SR-IOV
// NIC, no VF), so the suite registers its own device plugin (e2e/deviceplugin, in this process
// on the node) for a kube-fstack test resource with addresses of no real device; it sets
// PCIDEVICE_<RESOURCE> as the SR-IOV device plugin does. Real: the injector's resource request,
// the scheduler, the kubelet's device manager and the environment it gives the container, the
// supervisor reading it and rendering config.ini. Stand-in: DPDK cannot probe a fake address, so
// the stand-in image's supervisor runs testpmd on net_null ports in its place and logs it.
const (
	sriovNS    = "e2e-sriov"
	sriovStack = "e2e-sriov"
	sriovPod   = "e2e-sriov-app"
	fakeVF     = "kubefstack.io/e2e_fake_vf"
)

// fakeVFs are PCI addresses of the Intel PCH's usual slot, which no device holds here (the
// stand-in checks the node's sysfs before it substitutes).
var fakeVFs = []string{"0000:00:1f.2", "0000:00:1f.3", "0000:00:1f.4"}

func TestSRIOVThroughKubelet(t *testing.T) {
	ctx := context.Background()
	for _, bdf := range fakeVFs {
		if _, err := os.Stat(filepath.Join("/sys/bus/pci/devices", bdf)); err == nil {
			t.Fatalf("this node has a PCI device at %s: pick fakeVFs no device holds", bdf)
		}
	}
	plugin := deviceplugin.New(fakeVF, fakeVFs...)
	if d := os.Getenv("E2E_DEVICE_PLUGIN_DIR"); d != "" {
		plugin.Dir = d // where the node's kubelet.sock is seen from here (kind)
	}
	if err := plugin.Start(ctx); err != nil {
		t.Fatalf("%v (the test device plugin registers with the node's kubelet through %s; set E2E_DEVICE_PLUGIN_DIR when the kubelet runs elsewhere)", err, plugin.Dir)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.Dump(filepath.Join(artifacts(), "e2e-sriov-dump"), sriovNS))
		}
		if os.Getenv("E2E_KEEP") != "1" {
			if out, err := env.Kubectl("delete", "namespace", sriovNS, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
				t.Errorf("teardown: %v\n%s", err, out)
			}
			if out, err := env.Kubectl("delete", "datanetwork", sriovNetwork, "--ignore-not-found"); err != nil {
				t.Errorf("teardown: %v\n%s", err, out)
			}
		}
		plugin.Stop()
	})
	var pod *corev1.Pod

	step(t, "the kubelet advertises the test device plugin's devices on the node", func(t *testing.T) {
		waitNodeAllocatable(t, fakeVF, int64(len(fakeVFs)))
	})

	step(t, "an injected pod of a stack with two resource-backed PCI ports reaches Ready", func(t *testing.T) {
		mustApply(t, sriovManifests())
		pod = waitPodReady(t, sriovNS, sriovPod)
	})

	var allocated []string
	step(t, "the injector requested the resource for the dataplane, and the kubelet allocated it from the plugin", func(t *testing.T) {
		dp := container(pod, podcontract.DataplaneContainer)
		for what, list := range map[string]corev1.ResourceList{"limit": dp.Resources.Limits, "request": dp.Resources.Requests} {
			if q := list[fakeVF]; q.Cmp(resource.MustParse("2")) != 0 {
				t.Fatalf("dataplane %s of %s is %s, want 2 (one per port)", what, fakeVF, q.String())
			}
		}
		allocs := plugin.Allocations()
		if len(allocs) != 1 || len(allocs[0]) != 2 {
			t.Fatalf("the plugin served allocations %v, want one of 2 devices", allocs)
		}
		allocated = allocs[0]
		t.Logf("kubelet allocated %v of %s", allocated, fakeVF)
	})

	step(t, "the dataplane has PCIDEVICE_<RESOURCE>, and config.ini allows exactly those addresses", func(t *testing.T) {
		name := deviceplugin.EnvName(fakeVF)
		if name != render.PCIResourceEnv(fakeVF) {
			t.Fatalf("the SR-IOV device plugin's variable %s is not the one the supervisor reads, %s", name, render.PCIResourceEnv(fakeVF))
		}
		pid := onePID(t, pod, "fstack-supervisor")
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		want := name + "=" + strings.Join(allocated, ",")
		if !slices.Contains(strings.Split(string(environ), "\x00"), want) {
			t.Fatalf("the supervisor's environment lacks %s:\n%s", want, bytes.ReplaceAll(environ, []byte{0}, []byte("\n")))
		}
		ini, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/f-stack/config.ini", pid))
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Sorted(slices.Values(allocated))
		if !strings.Contains(string(ini), "\nallow="+strings.Join(sorted, ",")+"\n") {
			t.Fatalf("config.ini the supervisor wrote has no allow=%s:\n%s", strings.Join(sorted, ","), ini)
		}
		t.Logf("%s; config.ini allow=%s", want, strings.Join(sorted, ","))
	})

	step(t, "the stand-in says it runs testpmd on net_null in place of the fake devices, and does", func(t *testing.T) {
		checkStandinSubstituted(t, pod, allocated)
	})
}

// sriovNetwork is the SR-IOV VFs' data network, which the test writes as the platform would: the
// physical network behind the VFs is not the local cluster's br-fstack.
const sriovNetwork = "e2e-sriov"

func sriovManifests() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {kubefstack.io/injection: enabled}}
---
apiVersion: kubefstack.io/v1alpha1
kind: DataNetwork
metadata: {name: %[7]s}
spec:
  subnets: [10.98.0.0/24, 10.98.1.0/24]
  gateways: [10.98.0.1, 10.98.1.1]
  grants: [{namespaces: [%[1]s], ranges: [10.98.0.10-10.98.0.19, 10.98.1.10-10.98.1.19]}]
---
apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  processes: 1
  ports:
  - {name: vf0, dataNetwork: %[7]s, device: {pci: {resource: %[4]s}}, ipv4: {address: 10.98.0.10/24, gateway: 10.98.0.1}}
  - {name: vf1, dataNetwork: %[7]s, device: {pci: {resource: %[4]s}}, ipv4: {address: 10.98.1.10/24, gateway: 10.98.1.1}}
  dataplane: {hugePages: {amount: %[6]s}}
---
apiVersion: v1
kind: Pod
metadata: {name: %[3]s, namespace: %[1]s, labels: {kubefstack.io/stack: %[2]s}}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: app
    image: %[5]s
    imagePullPolicy: IfNotPresent
    command: [sh, -c, exec sleep infinity]
    resources:
      limits: {cpu: 500m, memory: 128Mi}
`, sriovNS, sriovStack, sriovPod, fakeVF, env.StandinImg, framework.StackHugePages, sriovNetwork)
}

// checkStandinSubstituted reads the dataplane's log and testpmd's real command line.
func checkStandinSubstituted(t *testing.T, p *corev1.Pod, allocated []string) {
	t.Helper()
	logs, err := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", podcontract.DataplaneContainer)
	if err != nil {
		t.Fatal(err)
	}
	logs = logtest.Readable(logs)
	for _, bdf := range allocated {
		if !strings.Contains(logs, "stand-in: PCI "+bdf+" cannot be probed here (no such device") {
			t.Fatalf("the dataplane's log does not say that %s was replaced:\n%s", bdf, logs)
		}
	}
	for _, want := range []string{"using net_null0 instead", "using net_null1 instead"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the dataplane's log lacks %q:\n%s", want, logs)
		}
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", onePID(t, p, "dpdk-testpmd")))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	for _, want := range []string{"--vdev=net_null0", "--vdev=net_null1", "--no-pci"} {
		if !slices.Contains(argv, want) {
			t.Fatalf("testpmd runs without %s: %q", want, argv)
		}
	}
	if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--allow=") }) {
		t.Fatalf("testpmd still got a fake address to probe: %q", argv)
	}
	t.Logf("testpmd: %s", strings.Join(argv, " "))
}

func onePID(t *testing.T, p *corev1.Pod, comm string) int {
	t.Helper()
	pids := podProcesses(t, p, comm)
	if len(pids) != 1 {
		t.Fatalf("want one %s process in pod %s's cgroup, found %v", comm, p.UID, pids)
	}
	return pids[0]
}

// waitNodeAllocatable waits until the node offers n of the resource (the kubelet reports device
// plugins' devices with its next node status update).
func waitNodeAllocatable(t *testing.T, name string, n int64) {
	t.Helper()
	err := framework.Poll(fmt.Sprintf("node %s allocatable %s=%d", env.NodeName, name, n), 2*time.Minute, time.Second, func() (bool, string, error) {
		node := &corev1.Node{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Name: env.NodeName}, node); err != nil {
			return false, err.Error(), nil
		}
		q, ok := node.Status.Allocatable[corev1.ResourceName(name)]
		return ok && q.Value() == n, "allocatable " + q.String(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPodReady waits for a named pod to run and be Ready.
func waitPodReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	err := framework.Poll("pod "+ns+"/"+name+" Running and Ready", 4*time.Minute, time.Second, func() (bool, string, error) {
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return false, err.Error(), nil
		}
		return p.Status.Phase == corev1.PodRunning && framework.PodReady(p), framework.PodSummary(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
