package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const (
	replicasNS    = "e2e-replicas"
	replicasStack = "e2e-pool"
	replicasApp   = "e2e-replicas"
)

// replicasManifests: a stack whose port takes each pod's address from a pool, in the lab's
// cpuPolicy Shared (the node has one exclusive CPU, and two dataplanes run here), and a
// Deployment of two replicas bound to it.
func replicasManifests() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {kubefstack.io/injection: enabled, pod-security.kubernetes.io/enforce: baseline}}
---
apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  processes: 1
  dpdk: {cpuPolicy: Shared}
  ports:
  - name: data
    attachment: %[3]s
    device: {vhostUser: {queues: 1}}
    ipv4:
      from: Pool
      pool: {ranges: ["10.99.0.20-10.99.0.29"], prefixLength: 24}
      gateway: 10.99.0.1
  dataplane: {hugePages: {amount: %[4]s}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[5]s, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[5]s}}
  template:
    metadata:
      labels: {app: %[5]s, kubefstack.io/stack: %[2]s}
      annotations: {k8s.v1.cni.cncf.io/networks: %[6]q}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - name: app
        image: %[7]s
        imagePullPolicy: IfNotPresent
        command: [sleep, infinity]
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 64Mi}}
`, replicasNS, replicasStack, env.Attachment, framework.StackHugePages, replicasApp, env.Networks, env.StandinImg)
}

// Issue 30: a Deployment of two replicas on one stack serves two addresses from its pool, each
// pod its own, on a node with one exclusive CPU (cpuPolicy Shared); both answer ping, and
// scaling to zero releases both addresses.
func TestTwoReplicasOnAPool(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.Dump(filepath.Join(artifacts(), "e2e-replicas-dump"), replicasNS))
		}
		if out, err := env.Kubectl("delete", "namespace", replicasNS, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("teardown: %v\n%s", err, out)
		}
	})
	mustApply(t, replicasManifests())

	var pods []corev1.Pod
	step(t, "both replicas are injected, Burstable, and Ready", func(t *testing.T) {
		err := framework.Poll("two Ready replicas", 5*time.Minute, time.Second, func() (bool, string, error) {
			list, err := env.Clientset.CoreV1().Pods(replicasNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + replicasApp})
			if err != nil {
				return false, "", err
			}
			ready := 0
			for i := range list.Items {
				if framework.PodReady(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil {
					ready++
				}
			}
			pods = list.Items
			return ready == 2 && len(list.Items) == 2, fmt.Sprintf("%d of %d pods Ready", ready, len(list.Items)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Status.QOSClass != corev1.PodQOSBurstable {
				t.Errorf("pod %s is %s; cpuPolicy Shared makes it Burstable (no exclusive CPU)", p.Name, p.Status.QOSClass)
			}
		}
	})

	// Issue 40 §1: under cpuPolicy Shared the dataplane shares the node's pool with the app and
	// the switch's PMD (this cluster's OVS polls on CPU 0, pmd-cpu-mask=0x1). Its lcore keeps off
	// the PMD's CPU, and the app's master off the lcore's, whenever the pool has a CPU for it
	// (it has CPUs 0-1 unless a Guaranteed pod holds CPU 1); else the placement says what is
	// shared.
	step(t, "each dataplane's lcore keeps off the switch's CPU and the app off the lcore's", func(t *testing.T) {
		for i := range pods {
			p := &pods[i]
			st := mustStatus(t, p)
			pl := st.Placement
			if pl == nil {
				t.Fatalf("pod %s: /status has no placement", p.Name)
			}
			if !slices.Equal(pl.SwitchCPUs, []int{0}) {
				t.Errorf("pod %s: switchCPUs %v, want [0] (the cluster's pmd-cpu-mask 0x1, through fstack-cni's device info)", p.Name, pl.SwitchCPUs)
			}
			if slices.Contains(pl.LcoreCPUs, 0) && len(pl.Warnings) == 0 {
				t.Errorf("pod %s: lcore on the switch's CPU 0 without a warning: %+v", p.Name, pl)
			}
			logs, err := env.Kubectl("logs", "-n", replicasNS, p.Name, "-c", "app")
			if err != nil {
				t.Fatalf("pod %s: %v\n%s", p.Name, err, logs)
			}
			lcores := make([]string, len(pl.LcoreCPUs))
			for k, c := range pl.LcoreCPUs {
				lcores[k] = strconv.Itoa(c)
			}
			if len(pl.Warnings) == 0 && !strings.Contains(logs, "no F-Stack lcore runs on (lcores on "+strings.Join(lcores, ",")+")") {
				t.Errorf("pod %s: the launcher did not keep the app off the lcores' CPUs %v:\n%s", p.Name, pl.LcoreCPUs, logs)
			}
			t.Logf("pod %s: lcores on %v, switch on %v, warnings %q", p.Name, pl.LcoreCPUs, pl.SwitchCPUs, pl.Warnings)
		}
	})

	addrs := map[string]netip.Addr{}
	step(t, "each pod serves its own address of the pool, and holds its claim", func(t *testing.T) {
		pool := netip.MustParsePrefix("10.99.0.16/28")
		for _, p := range pods {
			served, err := podcontract.ParseAddresses(p.Annotations[podcontract.AddressesAnnotation])
			if err != nil || len(served) != 1 || !pool.Contains(served[0].Addr) {
				t.Fatalf("pod %s serves %v (%v), want one address of 10.99.0.20-29", p.Name, served, err)
			}
			for other, a := range addrs {
				if a == served[0].Addr {
					t.Fatalf("pods %s and %s both serve %s", other, p.Name, a)
				}
			}
			addrs[p.Name] = served[0].Addr
			// The claim lives in the operator's namespace, named after the port's DataNetwork
			// and the address, bound to the pod by UID.
			err = framework.Poll("the claim bound to its pod", time.Minute, time.Second, func() (bool, string, error) {
				claim, err := replicaClaim(ctx, p.Namespace, served[0].Addr)
				if err != nil || claim == nil {
					return false, fmt.Sprintf("no claim of %s (%v)", served[0].Addr, err), nil
				}
				if claim.Name != fstackv1.NetworkAddressClaimName(claim.Spec.Network, served[0].Addr) {
					return false, "claim named " + claim.Name, nil
				}
				return claim.Spec.PodUID == string(p.UID), fmt.Sprintf("bound to %q (%s)", claim.Spec.Pod, claim.Spec.PodUID), nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})

	step(t, "both addresses answer ping from a namespace on the OVS bridge", func(t *testing.T) {
		peer, err := nodetest.AttachPeer(env.Vsctl, env.OVSNetns, env.OVSBridge, "e2e-rpeer", "e2er", "10.99.0.98/24")
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		for name, a := range addrs {
			summary, err := peer.Ping(a.String(), 5)
			if err != nil {
				t.Fatalf("pod %s at %s: %v", name, a, err)
			}
			t.Logf("ping %s (pod %s): %s", a, name, summary)
		}
	})

	step(t, "scaling to zero releases both addresses", func(t *testing.T) {
		if out, err := env.Kubectl("scale", "-n", replicasNS, "deployment/"+replicasApp, "--replicas=0"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		err := framework.Poll("no claim left", 2*time.Minute, time.Second, func() (bool, string, error) {
			var list fstackv1.AddressClaimList
			if err := env.Client.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
				return false, "", err
			}
			n := 0
			for _, c := range list.Items {
				if c.Spec.PodNamespace == replicasNS {
					n++
				}
			}
			return n == 0, fmt.Sprintf("%d claims", n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// replicaClaim is the claim of a held for a pod of namespace ns, in the operator's namespace, or nil.
func replicaClaim(ctx context.Context, ns string, a netip.Addr) (*fstackv1.AddressClaim, error) {
	var list fstackv1.AddressClaimList
	if err := env.Client.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
		return nil, err
	}
	for i, c := range list.Items {
		if c.Spec.PodNamespace == ns && c.Spec.Address == a.String() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
