// The end-to-end suite: the local cluster (hack/cluster) with the chart installed, driven the way
// a user drives it (kubectl apply, Deployments), and checked down to what the kernel, the kubelet
// and OVS report. hack/e2e.sh brings everything up and runs it (`make e2e`).
//
// Real: kube-apiserver, etcd, controller-manager, scheduler, kubelet (static CPU manager),
// containerd, kube-proxy, OVS-DPDK, hugepages, fstack-cni, the operator image, DPDK. Stand-in:
// F-Stack itself cannot be built here, so the dataplane image runs DPDK's testpmd (icmpecho) under
// the real supervisor with the EAL arguments F-Stack would use, and the app's "shim" is DPDK's
// dpdk-proc-info attaching as a secondary, as libff_syscall.so does.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/served"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const (
	injectedNS = "e2e-fstack"
	plainNS    = "e2e-plain"
	stackName  = "e2e-vhost"
	appName    = "e2e-app"
	appCont    = "app"
	stackAddr  = "10.99.0.10"
	peerAddr   = "10.99.0.99/24"
	hugeAmount = framework.StackHugePages
)

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// The namespaces and the StackInstance, as a user writes them.
func manifests() string {
	return env.SetupManifests(injectedNS, plainNS, stackName, stackAddr, "")
}

// The app is the stand-in image's dpdk-proc-info attaching to the dataplane's primary as a
// secondary, through nothing but the injected volumes, before the pod may become Ready. It also
// records what the launcher set FF_INITIAL_LCORE_ID to and the CPUs it runs on. It passes the
// shim's device option, --no-pci (dataplane-image/patches/0005-shim-secondary-no-pci.patch), so
// checkSecondaryAttached can see the app's log free of a scan of the node's PCI bus.
func workload() string {
	return fixtures.YAML(injectedDeployment(appName, 3, corev1.Container{
		Name: appCont, Image: env.StandinImg,
		Command: []string{"sh", "-c", `echo "$` + podcontract.EnvShimInitialLcore + `" >/tmp/lcore
sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status >/tmp/cpus
dpdk-proc-info --file-prefix=rte --single-file-segments --no-pci --log-level=5 -- --stats >/tmp/attach.txt 2>&1; echo $? >/tmp/attach.rc
exec sleep infinity
`},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", `test "$(cat /tmp/attach.rc)" = 0`}}}},
	}))
}

// injectedDeployment is every workload the suite applies: one pod bound to the suite's
// StackInstance (under Multus, through the networks annotation) whose container c, limited to
// 500m and 128Mi, is killed grace seconds after SIGTERM.
func injectedDeployment(name string, grace int64, c corev1.Container, opts ...fixtures.PodOption) *appsv1.Deployment {
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	return fixtures.Deployment(name, append([]fixtures.PodOption{
		fixtures.WithNamespace(injectedNS), fixtures.WithStackLabel(stackName),
		fixtures.WithAnnotation("k8s.v1.cni.cncf.io/networks", env.Networks),
		fixtures.WithTerminationGracePeriod(grace), fixtures.WithContainer(c),
	}, opts...)...)
}

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.Dump(filepath.Join(artifacts(), "e2e-dump"), injectedNS, plainNS))
		}
		teardown(t)
	})
	var pod *corev1.Pod

	step(t, "a valid StackInstance becomes Valid and gets its rendered ConfigMap", func(t *testing.T) {
		mustApply(t, manifests())
		si := waitStack(t, "Valid", func(si *fstackv1.StackInstance) (bool, string) {
			c := meta.FindStatusCondition(si.Status.Conditions, fstackv1.ConditionValid)
			return c != nil && c.Status == metav1.ConditionTrue, condString(si)
		})
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: injectedNS, Name: stackName + "-fstack"}, cm); err != nil {
			t.Fatalf("the ConfigMap %s-fstack: %v", stackName, err)
		}
		if !strings.Contains(cm.Data["config.ini"], "[port0]") || cm.Data["config-hash"] != si.Status.ConfigHash {
			t.Fatalf("ConfigMap: config.ini without [port0] or hash %q != status %q", cm.Data["config-hash"], si.Status.ConfigHash)
		}
	})

	step(t, "kubectl apply of invalid StackInstances is refused with the field path, and nothing is stored", func(t *testing.T) {
		for _, c := range []struct{ name, spec, want string }{
			// The CRD's schema.
			{"bad-processes", "processes: 0\n  ports: [{name: data, attachment: net1, device: {vhostUser: {}}, ipv4: {address: 10.99.0.11/24, gateway: 10.99.0.1}}]", "spec.processes"},
			// The validating webhook: vhost-user and PCI ports mixed, which only the whole spec shows.
			{"bad-mixed-ports", "processes: 1\n  ports:\n  - {name: a, attachment: net1, device: {vhostUser: {}}, ipv4: {address: 10.99.0.11/24, gateway: 10.99.0.1}}\n  - {name: b, device: {pci: {address: \"0000:3b:00.0\"}}, ipv4: {address: 10.99.1.11/24, gateway: 10.99.1.1}}", "spec.ports[1].device: Invalid value"},
		} {
			doc := fmt.Sprintf("apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: %s, namespace: %s}\nspec:\n  %s\n", c.name, injectedNS, c.spec)
			out, err := env.KubectlIn([]byte(doc), "apply", "-f", "-")
			if err == nil || !strings.Contains(out, c.want) {
				t.Fatalf("%s: want kubectl apply refused naming %s, got err=%v\n%s", c.name, c.want, err, out)
			}
			t.Logf("%s refused: %s", c.name, strings.Join(strings.Fields(out), " "))
			err = env.Client.Get(ctx, types.NamespacedName{Namespace: injectedNS, Name: c.name}, &fstackv1.StackInstance{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("%s: a refused StackInstance was stored (get: %v)", c.name, err)
			}
		}
	})

	step(t, "a Deployment's pod is injected and reaches Running and Ready", func(t *testing.T) {
		mustApply(t, workload())
		pod = waitAppPod(t, "")
	})

	step(t, "the injected pod has the dataplane sidecar, Guaranteed QoS, the shared volumes and env", func(t *testing.T) {
		checkInjected(t, pod)
	})

	step(t, "the kubelet gave the dataplane an exclusive CPU and the pod its hugepages", func(t *testing.T) {
		checkCPUsAndHugepages(t, pod)
	})

	step(t, "the dataplane runs with no capability, without privilege escalation, under the Localhost seccomp profile, on a read-only root", func(t *testing.T) {
		checkDataplaneConfined(t, pod)
	})

	step(t, "a pod naming the stack in a namespace that did not opt in is untouched", func(t *testing.T) {
		checkPlainPodUntouched(t)
	})

	step(t, "a pod of a namespace fstack-cni does not serve, declaring an emptyDir fstack-vhost as injected pods do, gets no port: its sandbox is refused naming the namespace", checkUnservedNamespaceRefused)
	step(t, "fstack-cni made a vhost-user port that OVS reports connected, and the pod directory", func(t *testing.T) {
		checkPortConnected(t, pod)
	})

	step(t, "the dataplane answers ping at the StackInstance's address from a namespace on the OVS bridge", func(t *testing.T) {
		checkPing(t, pod)
	})

	step(t, "fstack-cni's anti-spoofing rules guard the port, and pass every frame of the dataplane", func(t *testing.T) {
		checkPortGuarded(t, pod)
	})

	step(t, "the app container's DPDK secondary attached to the dataplane's primary through the injected volumes", func(t *testing.T) {
		checkSecondaryAttached(t, pod)
	})

	step(t, "F-Stack's tools run in the dataplane container on its exclusive CPU (kubectl exec ff_traffic, kubectl fstack traffic and netstat), and /metrics has per-process traffic counters", func(t *testing.T) {
		checkToolsOnTheExclusiveCPU(t, pod)
	})

	step(t, "StackInstance status counts the bound and ready pod", func(t *testing.T) {
		waitStack(t, "1 bound, 1 ready, Ready=True", func(si *fstackv1.StackInstance) (bool, string) {
			c := meta.FindStatusCondition(si.Status.Conditions, fstackv1.ConditionReady)
			return si.Status.BoundPods == 1 && si.Status.ReadyPods == 1 && si.Status.Ready == "1/1" && c != nil && c.Status == metav1.ConditionTrue, condString(si)
		})
	})

	step(t, "a selector-less Service annotated kubefstack.io/stack: the operator's EndpointSlice follows the pod (ready, unready, terminating, replaced), and a client pod's TCP to the ClusterIP reaches the dataplane's NIC", func(t *testing.T) {
		pod = checkServiceReachesStack(t, pod)
	})

	step(t, "three kill -9 of the dataplane's primary within two minutes: each a new generation in place and the app restarted in place, no container restart, /status counts them", func(t *testing.T) {
		pod = checkPrimaryKillsRecoverInPlace(t, pod)
	})

	step(t, "three kill -9 of the app within two minutes: its launcher restarts it in place each time, no container restart, /status counts them", func(t *testing.T) {
		pod = checkAppKillsRecoverInPlace(t, pod)
	})

	step(t, "the operator's metrics answer a metrics-reader's token over HTTPS and refuse an anonymous scrape", checkMetrics)

	step(t, "the webhook refuses a caller without the API server's client certificate in the TLS handshake", checkWebhookNeedsClientCert)

	step(t, "a real Prometheus scrapes the operator and the dataplane: injections by result, processes up, restarts, NIC packets while pinging", func(t *testing.T) {
		checkPrometheus(t, pod)
	})

	step(t, "one operator replica deleted, as a drain does, while pods naming a stack are created: none refused, each injected", checkReplicaKilled)

	step(t, "with the operator down, a pod naming a stack is refused with the webhook named, others start; back up, it injects again", checkOperatorDown)

	step(t, "restarting the operator breaks nothing: a replacement pod is injected and its old port and directory go", func(t *testing.T) {
		restartOperator(t)
		old := pod
		if err := env.Client.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		pod = waitAppPod(t, string(old.UID))
		checkInjected(t, pod)
		waitPodResourcesGone(t, old)
		waitStack(t, "1 bound, 1 ready after the replacement", func(si *fstackv1.StackInstance) (bool, string) {
			return si.Status.BoundPods == 1 && si.Status.ReadyPods == 1, condString(si)
		})
	})

	step(t, "deleting the workload removes its OVS port and socket directory; status shows no bound pods", func(t *testing.T) {
		if _, err := env.Kubectl("delete", "deployment", appName, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
			t.Fatal(err)
		}
		waitPodResourcesGone(t, pod)
		waitStack(t, "0 bound, Ready reason NoBoundPods", func(si *fstackv1.StackInstance) (bool, string) {
			c := meta.FindStatusCondition(si.Status.Conditions, fstackv1.ConditionReady)
			return si.Status.BoundPods == 0 && c != nil && c.Reason == fstackv1.ReasonNoBoundPods, condString(si)
		})
	})

	step(t, "a rolling update of 2 replicas (pool addresses, lab CPU policy Shared) while a client pings every ready endpoint of the Service's slices: no ping lost, never no ready endpoint", checkRolloutLosesNothing)

	step(t, "a native program (spec.program PerProcess, the stand-in of F-Stack's helloworld) is the pod's dataplane: Ready, answering ping, metrics up",
		checkNativeProgram("PerProcess", "--conf /etc/f-stack/config.ini --proc-type=primary --proc-id=0", "stand-in F-Stack program (not F-Stack)"))

	step(t, "F-Stack's Nginx (spec.program Nginx, its stand-in) is the pod's dataplane: the supervisor sets worker_processes and fstack_conf, counts the worker; Ready, ping, metrics up",
		checkNativeProgram("Nginx", `-g worker_processes 1; fstack_conf /etc/f-stack/config.ini; daemon off;`, "process is up (an nginx worker)", "stand-in F-Stack's Nginx (not F-Stack): 1 workers"))

	step(t, "the sample Nginx's httpGet readiness and tcpSocket liveness probes pass through the dataplane, though nothing answers on the pod IP, from the first (no Unhealthy event from its creation to two liveness periods after Ready); kubectl exec into it takes no shim context", func(t *testing.T) {
		mustApply(t, nginxSample(t))
		p := waitNginxReady(t)
		checkProbesRewritten(t, p)
		checkNoListenerOnPodIP(t, p)
		checkExecTakesNoShimContext(t, p)
		checkNoProbeFailedAtStart(t, p)
		deleteNginxSample(t, p)
	})

	step(t, "three SIGKILLed Nginx workers within two minutes, whose respawns segfault under multi-SC: each time the launcher restarts Nginx in place and it serves again", checkKilledWorkersRecoverInPlace)

	step(t, "ten nginx -s reload while a client asks for the page every 50 ms: each starts the new Nginx beside the old one, which stops once the new one serves; no request fails, the shim's free contexts unchanged", checkReloadsRestartNginxInPlace)

	step(t, "an injected Nginx runs each worker on its own CPU of the app container", checkNginxWorkersOnOwnCPUs)

	step(t, "an Nginx whose configuration breaks the shim (sendfile on) is refused with the file and line in its log", checkMisconfiguredNginxRefused)

	step(t, "OVS restarted while pods come and go: no OVS port, pod directory or lease leaks; restarted under a serving pod, its port is unready until it reconnects in place", checkOVSRestartLeaksNothing)

	step(t, "the node agent labels the node; without the OVS bridge a new injected pod stays Pending, with it back the pod runs", checkNodeAgentGatesScheduling)
}

// step runs one stage; a failed stage ends the suite, since every later one builds on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

func artifacts() string {
	if d := os.Getenv("E2E_ARTIFACTS"); d != "" {
		return d
	}
	return os.TempDir()
}

func mustApply(t *testing.T, doc string) {
	t.Helper()
	if out, err := env.KubectlIn([]byte(doc), "apply", "--server-side", "--field-manager=e2e", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

func condString(si *fstackv1.StackInstance) string {
	parts := []string{fmt.Sprintf("bound=%d ready=%d", si.Status.BoundPods, si.Status.ReadyPods)}
	for _, c := range si.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, " ")
}

func waitStack(t *testing.T, what string, ok func(*fstackv1.StackInstance) (bool, string)) *fstackv1.StackInstance {
	t.Helper()
	si := &fstackv1.StackInstance{}
	err := framework.Poll("StackInstance "+stackName+": "+what, 90*time.Second, 500*time.Millisecond, func() (bool, string, error) {
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: injectedNS, Name: stackName}, si); err != nil {
			return false, err.Error(), nil
		}
		good, why := ok(si)
		return good, why, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return si
}

// waitAppPod waits for the workload's one pod (other than the pod with UID notUID) to be Ready.
func waitAppPod(t *testing.T, notUID string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := framework.Poll("the "+appName+" pod Running and Ready", 4*time.Minute, time.Second, func() (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(context.Background(), pods, client.InNamespace(injectedNS), client.MatchingLabels{"app": appName}); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if string(p.UID) == notUID || p.DeletionTimestamp != nil {
				continue
			}
			seen = append(seen, framework.PodSummary(p))
			if p.Status.Phase == corev1.PodRunning && framework.PodReady(p) {
				got = p
				return true, "", nil
			}
		}
		return false, strings.Join(seen, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func container(p *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func checkInjected(t *testing.T, p *corev1.Pod) {
	t.Helper()
	var errs []string
	fail := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	dp := container(p, podcontract.DataplaneContainer)
	switch {
	case dp == nil:
		t.Fatalf("no %s container in the pod: %s", podcontract.DataplaneContainer, framework.PodSummary(p))
	case dp.RestartPolicy == nil || *dp.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		fail("the dataplane is not a native sidecar (restartPolicy Always)")
	}
	if p.Status.QOSClass != corev1.PodQOSGuaranteed {
		fail("QoS class %s, want Guaranteed", p.Status.QOSClass)
	}
	if q := dp.Resources.Limits[corev1.ResourceName("hugepages-2Mi")]; q.Cmp(resource.MustParse(hugeAmount)) != 0 {
		fail("dataplane hugepages-2Mi limit %s, want %s", q.String(), hugeAmount)
	}
	if q := dp.Resources.Limits[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		fail("dataplane cpu limit %s, want 1 (one per process)", q.String())
	}
	if p.Spec.ShareProcessNamespace == nil || !*p.Spec.ShareProcessNamespace {
		fail("shareProcessNamespace is not true (DPDK secondaries need the primary's PID namespace)")
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	if v, ok := vols[podcontract.HugePagesVolume]; !ok || v.EmptyDir == nil || v.EmptyDir.Medium != "HugePages-2Mi" {
		fail("volume %s is not an emptyDir of medium HugePages-2Mi: %+v", podcontract.HugePagesVolume, v)
	}
	if v, ok := vols[podcontract.VhostVolume]; !ok || v.EmptyDir == nil || v.HostPath != nil {
		fail("volume %s is not an emptyDir (the pod needs no hostPath): %+v", podcontract.VhostVolume, v)
	}
	for _, name := range []string{podcontract.DPDKRuntimeVolume, podcontract.ShimVolume, podcontract.AppStateVolume, podcontract.PodInfoVolume} {
		if _, ok := vols[name]; !ok {
			fail("no volume %s", name)
		}
	}
	app := container(p, appCont)
	mounts := map[string]string{}
	for _, m := range app.VolumeMounts {
		mounts[m.Name] = m.MountPath
		// The app runs the launcher and preloads the shim from the shim volume: it must not be
		// able to replace them, and writes only its own directory of the app-state volume.
		if m.Name == podcontract.ShimVolume && !m.ReadOnly {
			fail("app container mounts %s read-write", m.Name)
		}
		if m.Name == podcontract.AppStateVolume && (m.SubPath != appCont || m.MountPath != podcontract.AppStateDir) {
			fail("app container mounts %s as %+v, want only its own directory %s at %s", m.Name, m, appCont, podcontract.AppStateDir)
		}
	}
	if _, ok := mounts[podcontract.AppStateVolume]; !ok {
		fail("app container does not mount %s", podcontract.AppStateVolume)
	}
	for name, path := range map[string]string{podcontract.HugePagesVolume: podcontract.HugePagesDir, podcontract.DPDKRuntimeVolume: podcontract.DPDKRuntimeDir, podcontract.ShimVolume: podcontract.ShimDir} {
		if mounts[name] != path {
			fail("app container mounts %s at %q, want %s (the same path as the dataplane)", name, mounts[name], path)
		}
	}
	envs := map[string]string{}
	for _, e := range app.Env {
		envs[e.Name] = e.Value
	}
	// The shim's variables are the launcher's to give the app alone: in the container's env they
	// would reach kubectl exec shells and exec probes too.
	for _, name := range podcontract.ShimEnvNames() {
		if v, ok := envs[name]; ok {
			fail("app container env has the shim's %s=%q", name, v)
		}
	}
	if envs[podcontract.EnvInstances] != "1" {
		fail("app container env %s=%q, want 1", podcontract.EnvInstances, envs[podcontract.EnvInstances])
	}
	if len(app.Command) == 0 || !strings.HasSuffix(app.Command[0], podcontract.Launcher) {
		fail("the app's command does not start with the launcher: %q", app.Command)
	}
	if p.Annotations[fstackv1.StatusAnnotation] == "" || p.Annotations[podcontract.ConfigHashAnnotation] == "" {
		fail("annotations %s and %s missing", fstackv1.StatusAnnotation, podcontract.ConfigHashAnnotation)
	}
	if len(errs) > 0 {
		t.Fatalf("injection of %s:\n  %s", p.Name, strings.Join(errs, "\n  "))
	}
}

// cpuManagerState is the kubelet's checkpoint of the static CPU manager.
type cpuManagerState struct {
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries"`
}

func checkCPUsAndHugepages(t *testing.T, p *corev1.Pod) {
	t.Helper()
	raw, err := env.NodeRead("/var/lib/kubelet/cpu_manager_state")
	if err != nil {
		t.Fatal(err)
	}
	var st cpuManagerState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	dpCPUs := st.Entries[string(p.UID)][podcontract.DataplaneContainer]
	if dpCPUs == "" || dpCPUs == st.DefaultCPUSet {
		t.Fatalf("the kubelet's CPU manager gave the dataplane no exclusive CPU: %s", raw)
	}
	// What the container's processes may run on is its cpuset: an exec'd process inherits it.
	if got := execIn(t, p, podcontract.DataplaneContainer, "sed", "-n", `s/^Cpus_allowed_list:[[:space:]]*//p`, "/proc/self/status"); got != dpCPUs {
		t.Fatalf("the dataplane container runs on CPUs %q, the CPU manager gave it %q", got, dpCPUs)
	}
	t.Logf("dataplane CPUs %s (exclusive), shared pool %s", dpCPUs, st.DefaultCPUSet)
	// The container's own hugetlb cgroup (v1 here, v2 on newer nodes) holds the hugepages limit.
	limit := execIn(t, p, podcontract.DataplaneContainer, "sh", "-c",
		"cat /sys/fs/cgroup/hugetlb/hugetlb.2MB.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/hugetlb.2MB.max")
	want := resource.MustParse(hugeAmount)
	if limit != strconv.FormatInt(want.Value(), 10) {
		t.Fatalf("the dataplane's hugetlb 2MB limit is %s, want %d", limit, want.Value())
	}
	// The launcher set FF_INITIAL_LCORE_ID (a hex mask, despite its name) to the first CPU the
	// app container may run on.
	lcore := execIn(t, p, appCont, "cat", "/tmp/lcore")
	cpus := execIn(t, p, appCont, "cat", "/tmp/cpus")
	first := strings.FieldsFunc(cpus, func(r rune) bool { return r == ',' || r == '-' })
	cpu, err := strconv.Atoi(first[0])
	if err != nil || lcore != fmt.Sprintf("0x%x", uint64(1)<<cpu) {
		t.Fatalf("%s=%q, but the app's first CPU is %q (of %q)", podcontract.EnvShimInitialLcore, lcore, first[0], cpus)
	}
	if strings.Contains(","+cpus+",", ","+dpCPUs+",") {
		t.Fatalf("the app container may run on the dataplane's exclusive CPU %s (app CPUs %s)", dpCPUs, cpus)
	}
}

func execIn(t *testing.T, p *corev1.Pod, cont string, cmd ...string) string {
	t.Helper()
	out, err := env.KubectlStdout(append([]string{"exec", "-n", p.Namespace, p.Name, "-c", cont, "--"}, cmd...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func checkPlainPodUntouched(t *testing.T) {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: %s, labels: {kubefstack.io/stack: %s}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: nginx, image: localhost/nginx:1.22, imagePullPolicy: IfNotPresent, resources: {requests: {cpu: 50m, memory: 32Mi}}}
`, plainNS, stackName)
	mustApply(t, doc)
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: plainNS, Name: "plain"}, p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 0 || len(p.Spec.Containers) != 1 || len(p.Spec.Volumes) > 1 || p.Annotations[fstackv1.StatusAnnotation] != "" {
		t.Fatalf("a pod outside opted-in namespaces was changed: %d init containers, %d containers, volumes %v, annotations %v",
			len(p.Spec.InitContainers), len(p.Spec.Containers), p.Spec.Volumes, p.Annotations)
	}
	if _, err := env.Kubectl("delete", "pod", "plain", "-n", plainNS, "--wait=false"); err != nil {
		t.Fatal(err)
	}
}

// checkUnservedNamespaceRefused: in chained mode fstack-cni runs for every pod of the node, so a
// pod outside the served namespaces (e2e-plain is not in the node config's namespaces) that
// declares the injected emptyDir's name must be refused at ADD, not given a port and a lease.
// Under Multus the pod names the network, and fstack-cni (or Multus's namespace isolation)
// refuses it; either way no OVS port is made for it.
func checkUnservedNamespaceRefused(t *testing.T) {
	t.Helper()
	annotations := "{}"
	if env.Networks != "" {
		annotations = fmt.Sprintf("{k8s.v1.cni.cncf.io/networks: %q}", env.Networks)
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: posing, namespace: %s, annotations: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: nginx, image: localhost/nginx:1.22, imagePullPolicy: IfNotPresent, resources: {requests: {cpu: 50m, memory: 32Mi}},
     volumeMounts: [{name: %s, mountPath: /var/run/kube-fstack/vhost}]}
  volumes:
  - {name: %s, emptyDir: {}}
`, plainNS, annotations, podcontract.VhostVolume, podcontract.VhostVolume)
	mustApply(t, doc)
	defer env.Kubectl("delete", "pod", "posing", "-n", plainNS, "--wait=false") //nolint:errcheck // cleanup
	ctx := context.Background()
	err := framework.Poll("the pod's sandbox refused by fstack-cni", 2*time.Minute, time.Second, func() (bool, string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: plainNS, Name: "posing"}, p); err != nil {
			return false, err.Error(), nil
		}
		if p.Status.Phase == corev1.PodRunning {
			return false, "", fmt.Errorf("pod %s/posing runs: %s", plainNS, framework.PodSummary(p))
		}
		if ports, err := env.PortsOfPod(string(p.UID)); err != nil || len(ports) != 0 {
			return false, "", fmt.Errorf("fstack-cni made ports %v for a pod of a namespace it does not serve (%w)", ports, err)
		}
		evs, err := env.Clientset.CoreV1().Events(plainNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=posing"})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedCreatePodSandBox" && (env.Networks != "" || strings.Contains(e.Message, `namespace "`+plainNS+`" is not one fstack-cni serves`)) {
				t.Logf("%s: %s", e.Reason, e.Message)
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, none FailedCreatePodSandBox naming the namespace", len(evs.Items)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkPortConnected(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ports, err := env.PortsOfPod(string(p.UID))
	if err != nil || len(ports) != 1 {
		t.Fatalf("want one OVS port for pod %s, got %v (%v)", p.UID, ports, err)
	}
	if typ, _ := env.Vsctl("get", "Interface", ports[0], "type"); typ != "dpdkvhostuserclient" {
		t.Fatalf("port %s has type %q, want dpdkvhostuserclient", ports[0], typ)
	}
	if out, err := env.Vsctl("--timeout=60", "wait-until", "Interface", ports[0], "status:status=connected"); err != nil {
		t.Fatalf("OVS never reported %s connected: %v %s", ports[0], err, out)
	}
	// The kubelet made the pod's emptyDir before the sandbox, and fstack-cni's link leads OVS
	// there: the real proof that CNI ADD runs after the kubelet mounted the pod's volumes.
	dir := filepath.Join(env.SocketRoot, string(p.UID))
	want := filepath.Join("/var/lib/kubelet/pods", string(p.UID), "volumes/kubernetes.io~empty-dir", podcontract.VhostVolume)
	if target, err := os.Readlink(dir); err != nil || target != want {
		t.Fatalf("the pod's link %s -> %q (%v), want -> %s", dir, target, err, want)
	}
	for _, f := range []string{env.Attachment + ".json", env.Attachment + ".sock"} {
		if _, err := os.Stat(filepath.Join(want, f)); err != nil {
			t.Fatalf("the pod's emptyDir: %v", err)
		}
	}
	t.Logf("port %s connected; %s -> %s holds %s.json and .sock", ports[0], dir, want, env.Attachment)
}

// checkPing puts a host of the test's own on the OVS bridge and pings the StackInstance's
// address, which the dataplane's testpmd (icmpecho) answers.
func checkPing(t *testing.T, p *corev1.Pod) {
	t.Helper()
	peer, err := nodetest.AttachPeer(env.Vsctl, env.OVSNetns, env.OVSBridge, "e2e-peer", "e2ev", peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	// A burst may lose a packet on 2 shared CPUs: one of 5 must get every reply.
	addr := servedAddr(t, p)
	summary, err := peer.Ping(addr, 5)
	if err != nil {
		t.Fatalf("through the vhost-user port: %v", err)
	}
	t.Logf("ping %s: %s", addr, summary)
	// The stand-in speaks no TCP, so ping is all it can show; what makes TCP from this kernel
	// client reach real F-Stack is its tx checksum offload off (cni/test/node proves the SYN's
	// checksum at the vhost-user port).
	if out, err := nodetest.Run("ip", "netns", "exec", peer.Netns, "ethtool", "-k", peer.Link); err != nil || !strings.Contains(out, "\ntx-checksumming: off") {
		t.Errorf("the e2e's kernel client %s: tx checksum offload not off (%v):\n%s", peer.Link, err, out)
	}
}

func checkSecondaryAttached(t *testing.T, p *corev1.Pod) {
	t.Helper()
	// At start, before the pod was Ready.
	out := execIn(t, p, appCont, "cat", "/tmp/attach.txt")
	if !strings.Contains(out, "NIC statistics for port 0") {
		t.Fatalf("the app's dpdk-proc-info at start saw no port 0:\n%s", out)
	}
	// With the shim's --no-pci the secondary probes no device of the node's PCI bus (the
	// vhost-user port is a vdev, attached through the primary).
	for _, scan := range []string{"is not driven by the primary process", "cannot be used"} {
		if strings.Contains(out, scan) {
			t.Errorf("the app's dpdk-proc-info scanned the node's PCI bus (%q):\n%s", scan, out)
		}
	}
	// Now, after the ping: the secondary reads the primary's live counters.
	out = execIn(t, p, appCont, "dpdk-proc-info", "--file-prefix=rte", "--single-file-segments", "--no-pci", "--log-level=5", "--", "--stats")
	rx := -1
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "RX-packets:" {
			rx, _ = strconv.Atoi(f[1])
			break
		}
	}
	if rx <= 0 {
		t.Fatalf("a secondary in the app container read RX-packets %d from the primary, want > 0 after the ping:\n%s", rx, out)
	}
	t.Logf("secondary in %s/%s: port 0 RX-packets %d", p.Name, appCont, rx)
}

// podProcesses finds the host PIDs of the pod's processes with the given name, by cgroup.
func podProcesses(t *testing.T, p *corev1.Pod, comm string) []int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		c, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || !strings.HasPrefix(comm, strings.TrimSpace(string(c))) {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil || !strings.Contains(string(cg), "pod"+string(p.UID)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

func restartOperator(t *testing.T) {
	t.Helper()
	deps, err := env.Clientset.AppsV1().Deployments(env.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(deps.Items) == 0 {
		t.Fatalf("no operator Deployment in %s: %v", env.Namespace, err)
	}
	for _, d := range deps.Items {
		if _, err := env.Kubectl("rollout", "restart", "-n", env.Namespace, "deployment/"+d.Name); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl("rollout", "status", "-n", env.Namespace, "deployment/"+d.Name, "--timeout=180s"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

func waitPodResourcesGone(t *testing.T, p *corev1.Pod) {
	t.Helper()
	dir := filepath.Join(env.SocketRoot, string(p.UID))
	err := framework.Poll("OVS port and link of deleted pod "+p.Name+" gone", 2*time.Minute, time.Second, func() (bool, string, error) {
		ports, err := env.PortsOfPod(string(p.UID))
		if err != nil {
			return false, err.Error(), nil
		}
		_, statErr := os.Lstat(dir) // the link itself, not what it leads to
		return len(ports) == 0 && os.IsNotExist(statErr), fmt.Sprintf("ports %v, dir stat: %v", ports, statErr), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func teardown(t *testing.T) {
	if os.Getenv("E2E_KEEP") == "1" {
		t.Logf("E2E_KEEP=1: namespaces %s and %s left in place", injectedNS, plainNS)
		return
	}
	for _, ns := range []string{injectedNS, plainNS} {
		if out, err := env.Kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("teardown: %v\n%s", err, out)
		}
	}
}

// servedAddr is the IPv4 address p's F-Stack serves on port 0 (served.Addresses, as the
// operator's EndpointSlices and the CLI read it): the suite's stack takes its addresses from a
// pool, so a replacement pod created while the old one still drains serves the next address,
// not stackAddr.
func servedAddr(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	addrs, err := served.Addresses(cur, "")
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	for _, a := range addrs {
		if a.Is4() {
			return a.String()
		}
	}
	t.Fatalf("pod %s serves no IPv4 address on port 0: %v", p.Name, addrs)
	return ""
}
