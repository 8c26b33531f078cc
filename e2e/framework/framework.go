// Package framework is what the end-to-end tests and the cluster benchmark share: clients for
// the local cluster that hack/e2e.sh brought up and installed the chart into, kubectl and
// ovs-vsctl runners, polling, and the failure dump (pods, events, operator, CNI and dataplane
// logs).
package framework

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// Env is the cluster under test, described by the variables hack/e2e.sh exports (it takes them
// from hack/cluster/lib.sh, so the tests and the scripts cannot disagree).
type Env struct {
	Kubeconfig  string   // E2E_KUBECONFIG
	KubectlBin  string   // E2E_KUBECTL
	OVSDBSock   string   // E2E_OVSDB_SOCK: the cluster's private OVS
	OVSNetns    string   // E2E_OVS_NETNS: the namespace ovs-vswitchd runs in
	OVSBridge   string   // E2E_OVS_BRIDGE
	SocketRoot  string   // E2E_SOCKET_ROOT: fstack-cni's per-pod directories
	LogDir      string   // E2E_LOG_DIR: component logs (fstack-cni.log among them)
	Namespace   string   // E2E_OPERATOR_NAMESPACE: where the chart is installed
	Release     string   // E2E_RELEASE: the Helm release name
	StandinImg  string   // E2E_DATAPLANE_IMAGE: the dataplane stand-in (has DPDK's tools)
	NodeName    string   // E2E_NODE
	Attachment  string   // E2E_ATTACHMENT: the interface fstack-cni serves (eth0 chained, net1 under Multus)
	Networks    string   // E2E_NETWORKS: the Multus networks annotation of bound pods ("" when chained)
	NodeExec    []string // E2E_NODE_EXEC (optional): the command prefix that runs on the node, e.g. for kind
	OVSRestart  string   // E2E_OVS_RESTART (optional): a command that restarts the node's OVS, as a node would
	IPAMDir     string   // E2E_IPAM_DIR (optional): host-local's lease directory of fstack-cni's network
	Scheme      *runtime.Scheme
	Client      client.Client
	Clientset   kubernetes.Interface
	CallTimeout time.Duration
}

// FromEnv reads the cluster's description. A missing variable is an error that says how the
// suite is meant to be run, never a skip.
func FromEnv() (*Env, error) {
	get := func(name string) (string, error) {
		v := os.Getenv(name)
		if v == "" {
			return "", fmt.Errorf("%s is not set: run the end-to-end tests with `make e2e` (hack/e2e.sh brings up the local cluster, installs the chart and sets it)", name)
		}
		return v, nil
	}
	e := &Env{CallTimeout: 30 * time.Second}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"E2E_KUBECONFIG", &e.Kubeconfig}, {"E2E_KUBECTL", &e.KubectlBin}, {"E2E_OVSDB_SOCK", &e.OVSDBSock},
		{"E2E_OVS_BRIDGE", &e.OVSBridge}, {"E2E_SOCKET_ROOT", &e.SocketRoot},
		{"E2E_LOG_DIR", &e.LogDir}, {"E2E_OPERATOR_NAMESPACE", &e.Namespace}, {"E2E_RELEASE", &e.Release},
		{"E2E_DATAPLANE_IMAGE", &e.StandinImg}, {"E2E_NODE", &e.NodeName},
	} {
		v, err := get(f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	e.NodeExec = strings.Fields(os.Getenv("E2E_NODE_EXEC"))
	e.OVSNetns = os.Getenv("E2E_OVS_NETNS")
	e.Networks = os.Getenv("E2E_NETWORKS")
	e.OVSRestart, e.IPAMDir = os.Getenv("E2E_OVS_RESTART"), os.Getenv("E2E_IPAM_DIR")
	if e.Attachment = os.Getenv("E2E_ATTACHMENT"); e.Attachment == "" {
		e.Attachment = "eth0"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", e.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	e.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	if err := fstackv1.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if e.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// KubectlIn runs kubectl against the cluster with stdin (may be nil) and returns its combined
// output.
func (e *Env) KubectlIn(stdin []byte, args ...string) (string, error) {
	return e.kubectl(stdin, true, args)
}

// KubectlStdout runs kubectl and returns its stdout alone (stderr goes into the error): for
// `kubectl exec`, whose stderr carries the container's warnings.
func (e *Env) KubectlStdout(args ...string) (string, error) {
	return e.kubectl(nil, false, args)
}

func (e *Env) kubectl(stdin []byte, combined bool, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*e.CallTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e.KubectlBin, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if combined {
		cmd.Stderr = &stdout
	}
	if err := cmd.Run(); err != nil {
		msg := stderr.Bytes()
		if combined {
			msg = stdout.Bytes()
		}
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(msg))
	}
	return stdout.String(), nil
}

// Kubectl runs kubectl with no input.
func (e *Env) Kubectl(args ...string) (string, error) { return e.KubectlIn(nil, args...) }

// Vsctl runs ovs-vsctl against the cluster's private OVS.
func (e *Env) Vsctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.CallTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-vsctl", append([]string{"--db=unix:" + e.OVSDBSock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ovs-vsctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// PortsOfPod lists the OVS interfaces fstack-cni made for a pod (it tags them with the pod UID).
func (e *Env) PortsOfPod(uid string) ([]string, error) {
	out, err := e.Vsctl("--timeout=10", "--columns=name", "--bare", "find", "Interface", "external_ids:kube-fstack.io/pod-uid="+uid)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// NodeRead reads a file of the node: directly on the local cluster, where the node is this
// machine, or through E2E_NODE_EXEC (a kind node is a container).
func (e *Env) NodeRead(path string) ([]byte, error) {
	if len(e.NodeExec) == 0 {
		return os.ReadFile(path)
	}
	out, err := nodetest.Run(e.NodeExec[0], append(e.NodeExec[1:], "cat", path)...)
	return []byte(out), err
}

// SetupManifests is what both the suite and the benchmark start from: a namespace opted into
// injection that enforces Pod Security "baseline" (a vhost-user stack's pods meet it), one that
// is not, and in the first a one-process StackInstance with a vhost-user port
// on the attachment fstack-cni serves, its addresses from a pool that starts at addr (a /24 of
// fstack-cni's bridge; each pod its own, the first pod addr) with hugepages
// 256Mi, so it fits beside a small app on the local cluster's one exclusive CPU. mac "" leaves
// the port the attachment's MAC, the only one br-fstack's anti-spoofing rules let through.
func (e *Env) SetupManifests(injectedNS, plainNS, stack, addr, mac string) string {
	vhost := "{queues: 1}"
	if mac != "" {
		vhost = fmt.Sprintf("{queues: 1, mac: %q}", mac)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {kubefstack.io/injection: enabled, pod-security.kubernetes.io/enforce: baseline}}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %[3]s, namespace: %[1]s}
spec:
  processes: 1
  ports:
  - name: data
    attachment: %[6]s
    device: {vhostUser: %[5]s}
    ipv4: {from: Pool, pool: {ranges: ["%[4]s-%[8]s"], prefixLength: 24}, gateway: 10.99.0.1}
  dataplane: {hugePages: {amount: %[7]s}}
`, injectedNS, plainNS, stack, addr, vhost, e.Attachment, StackHugePages, poolEnd(addr))
}

// poolEnd is the last address of the suite stack's pool, which starts at addr: ten addresses, so
// that a pod created while another of the stack still exists is admitted (a static address
// serves one pod), and the lowest free one, addr, goes to the first pod.
func poolEnd(addr string) string {
	a := netip.MustParseAddr(addr)
	for range 9 {
		a = a.Next()
	}
	return a.String()
}

// StackHugePages is the hugepage memory of SetupManifests' StackInstance.
const StackHugePages = "256Mi"

// Poll calls cond every interval until it returns true, an error, or the timeout passes; the
// returned error names what was awaited and the last reason cond gave.
func Poll(what string, timeout, interval time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if why != "" {
			last = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s (last seen: %s)", what, timeout, last)
		}
		time.Sleep(interval)
	}
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodSummary is one line on a pod: phase, and each container's state and restarts.
func PodSummary(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s phase=%s", p.Name, p.Status.Phase)
	all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range all {
		state := "waiting"
		switch {
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = "terminated:" + s.State.Terminated.Reason
		case s.State.Waiting != nil:
			state = "waiting:" + s.State.Waiting.Reason
		}
		fmt.Fprintf(&b, " %s=%s ready=%t restarts=%d", s.Name, state, s.Ready, s.RestartCount)
	}
	return b.String()
}

// Dump writes what a failed run needs to be understood: pods (described), events of the given
// namespaces and the operator's, the operator's logs, every container's logs (current and
// previous) in the given namespaces, and the tail of the CNI plugin's log. It writes into dir and
// returns a short index for the test log.
func (e *Env) Dump(dir string, namespaces ...string) string {
	_ = os.MkdirAll(dir, 0o755)
	var index []string
	save := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err == nil {
			index = append(index, p)
		}
	}
	for _, ns := range append([]string{e.Namespace}, namespaces...) {
		out, _ := e.Kubectl("describe", "pods", "-n", ns)
		save(ns+".pods.txt", out)
		out, _ = e.Kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp")
		save(ns+".events.txt", out)
		out, _ = e.Kubectl("get", "stackinstances,configmaps,pods", "-n", ns, "-o", "wide")
		save(ns+".objects.txt", out)
		pods, err := e.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			var cs []string
			for _, c := range p.Spec.InitContainers {
				cs = append(cs, c.Name)
			}
			for _, c := range p.Spec.Containers {
				cs = append(cs, c.Name)
			}
			for _, c := range cs {
				cur, _ := e.Kubectl("logs", "-n", ns, p.Name, "-c", c, "--tail=300")
				prev, _ := e.Kubectl("logs", "-n", ns, p.Name, "-c", c, "--previous", "--tail=300")
				save(fmt.Sprintf("%s.%s.%s.log", ns, p.Name, c), cur+"\n--- previous ---\n"+prev)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.LogDir, "fstack-cni.log")); err == nil {
		if len(b) > 64<<10 {
			b = b[len(b)-64<<10:]
		}
		save("fstack-cni.log", string(b))
	}
	out, _ := e.Vsctl("show")
	save("ovs-vsctl-show.txt", out)
	return "diagnostics written:\n  " + strings.Join(index, "\n  ")
}
