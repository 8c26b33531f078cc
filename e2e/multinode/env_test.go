// Package multinode is the multi-node tier (`make test-multinode`, hack/e2e-multinode.sh): the
// chart installed on a kind cluster of a control plane and two workers, each worker with its own
// OVS-DPDK, joined by one data network (hack/kind/up.sh). TestMultiNode runs its steps in order
// on one shared stack: its replicas spread over the workers, the Service reached from every node,
// a node that cannot run the stack, a drain, a DaemonSet upgrade and, last, a lost worker.
//
// F-Stack itself cannot be built in CI: the dataplane is the stand-in (DPDK testpmd answering
// ping in F-Stack's place, hack/image-dataplane-standin.sh). Everything else is real: kind's
// nodes, kubelets, containerd, kube-proxy, each worker's OVS-DPDK and vhost-user ports.
package multinode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/served"
)

const (
	ns       = "e2e-multinode"
	stack    = "mn-stack"
	app      = "mn-app"
	svcName  = "mn-svc"
	poolFrom = "10.98.0.20"
	poolTo   = "10.98.0.39"
)

// cluster is what hack/kind/lib.sh (kind_e2e_env) says about the cluster under test.
type cluster struct {
	kubeconfig, kubectl, engine, kindName, gateway, opNS, release, kindUp, standin, cniArchive, dataBridge string
	c                                                                                                      client.Client
	plugin                                                                                                 string
}

var (
	env      *cluster
	envErr   error
	envOnce  sync.Once
	setupErr error
	setupMu  sync.Mutex
	setupOK  bool
)

func getenv(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set: run the multi-node tier with `make test-multinode` (hack/e2e-multinode.sh brings up the kind cluster, installs the chart and sets it)", name)
	}
	return v, nil
}

// mustEnv is the cluster, or the test fails saying how the tier is meant to run.
func mustEnv(t *testing.T) *cluster {
	t.Helper()
	envOnce.Do(func() {
		e := &cluster{}
		for _, f := range []struct {
			name string
			dst  *string
		}{
			{"E2E_KUBECONFIG", &e.kubeconfig}, {"E2E_KUBECTL", &e.kubectl}, {"E2E_NODE_ENGINE", &e.engine},
			{"E2E_KIND_CLUSTER", &e.kindName}, {"E2E_DATA_GATEWAY", &e.gateway}, {"E2E_OPERATOR_NAMESPACE", &e.opNS},
			{"E2E_RELEASE", &e.release}, {"E2E_KIND_UP", &e.kindUp}, {"E2E_DATAPLANE_IMAGE", &e.standin},
			{"E2E_CNI_ARCHIVE", &e.cniArchive}, {"E2E_DATA_BRIDGE", &e.dataBridge},
		} {
			v, err := getenv(f.name)
			if err != nil {
				envErr = err
				return
			}
			*f.dst = v
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
		if err != nil {
			envErr = err
			return
		}
		scheme := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			envErr = err
			return
		}
		if err := fstackv1.AddToScheme(scheme); err != nil {
			envErr = err
			return
		}
		if e.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			envErr = err
			return
		}
		dir, err := os.MkdirTemp("", "kube-fstack-multinode-")
		if err != nil {
			envErr = err
			return
		}
		e.plugin = filepath.Join(dir, "kubectl-fstack")
		if out, err := exec.Command("go", "build", "-o", e.plugin, "../../kubectl-fstack/cmd/kubectl-fstack").CombinedOutput(); err != nil {
			envErr = fmt.Errorf("build kubectl-fstack: %w\n%s", err, out)
			return
		}
		env = e
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (e *cluster) kubectlIn(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (e *cluster) kc(args ...string) (string, error) { return e.kubectlIn("", args...) }

func (e *cluster) mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.kc(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *cluster) apply(t *testing.T, manifests string) {
	t.Helper()
	// The webhook may refuse for a moment after the operator moved (connection refused while
	// kube-proxy catches up): apply until it takes the manifests, as a user would retry.
	var err error
	for i := 0; i < 30; i++ {
		if _, err = e.kubectlIn(manifests, "apply", "-f", "-"); err == nil {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatal(err)
}

// onNode runs a command inside a node's container, as a node's own shell would.
func (e *cluster) onNode(node string, args ...string) (string, error) {
	return run(e.engine, append([]string{"exec", node}, args...)...)
}

// nodes are the cluster's nodes by role, each sorted by name.
func (e *cluster) nodes(t *testing.T) (controlPlane string, workers []string) {
	t.Helper()
	list := &corev1.NodeList{}
	if err := e.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp {
			controlPlane = n.Name
			continue
		}
		workers = append(workers, n.Name)
	}
	sort.Strings(workers)
	if controlPlane == "" || len(workers) < 2 {
		t.Fatalf("want a control plane and at least two workers, have control plane %q and workers %v", controlPlane, workers)
	}
	return controlPlane, workers
}

func (e *cluster) nodeIP(t *testing.T, name string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", name)
	return ""
}

// appPods are the Deployment's pods that are not being deleted.
func (e *cluster) appPods(t *testing.T, name string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.NodeName < out[j].Spec.NodeName })
	return out
}

// waitReady waits for n Ready pods of the Deployment (no others left) and returns them.
func (e *cluster) waitReady(t *testing.T, name string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.Poll(fmt.Sprintf("%d Ready pods of %s", n, name), timeout, time.Second, func() (bool, string, error) {
		pods = e.appPods(t, name)
		var sum []string
		ready := 0
		for i := range pods {
			sum = append(sum, framework.PodSummary(&pods[i])+" on "+pods[i].Spec.NodeName)
			if framework.PodReady(&pods[i]) {
				ready++
			}
		}
		return ready == n && len(pods) == n, strings.Join(sum, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func servedAddr(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	addrs, err := served.Addresses(p, "")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("pod %s serves no address: %v", p.Name, err)
	}
	return addrs[0].String()
}

func inPool(a string) bool {
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return false
	}
	from, to := netip.MustParseAddr(poolFrom), netip.MustParseAddr(poolTo)
	return addr.Compare(from) >= 0 && addr.Compare(to) <= 0
}

// ping is one echo request from the data network's router (the host's bridge), as a client
// of the data network would send it. The stand-in dataplane answers ping in F-Stack's place,
// but unlike F-Stack (whose FreeBSD stack announces an address it takes with a gratuitous ARP)
// it announces nothing: when a pool address moves to a new pod (a new MAC), the client would
// keep the old pod's MAC until its neighbour entry expires. Unanswered, the entry is dropped
// and the ping sent once more, as the announcement would have made it.
func ping(addr string) bool {
	if _, err := run("ping", "-c", "1", "-W", "1", addr); err == nil {
		return true
	}
	_, _ = run("ip", "neigh", "del", addr, "dev", env.dataBridge)
	_, err := run("ping", "-c", "1", "-W", "1", addr)
	return err == nil
}

// rxPackets reads the dataplane's packets received on port 0 (the host routes every node's
// podCIDR, hack/kind/up.sh).
func rxPackets(t *testing.T, p *corev1.Pod) int64 {
	t.Helper()
	n, err := framework.NICRxPackets(p.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func rxTotal(t *testing.T, pods []corev1.Pod) int64 {
	t.Helper()
	var sum int64
	for i := range pods {
		sum += rxPackets(t, &pods[i])
	}
	return sum
}

// claims are the AddressClaims of the stack's addresses (in the operator's namespace).
func (e *cluster) claims(t *testing.T) []fstackv1.AddressClaim {
	t.Helper()
	list := &fstackv1.AddressClaimList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(e.opNS)); err != nil {
		t.Fatal(err)
	}
	var out []fstackv1.AddressClaim
	for _, c := range list.Items {
		if c.Spec.PodNamespace == ns && c.Spec.StackInstance == stack {
			out = append(out, c)
		}
	}
	return out
}

// socketDirs are the per-pod directories under the node's vhost-user socket root.
func (e *cluster) socketDirs(t *testing.T, node string) []string {
	t.Helper()
	out, err := e.onNode(node, "sh", "-c", "ls -1 /var/run/kube-fstack/vhost 2>/dev/null || true")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}
