package multinode

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

// endpoint is what a check reads of one endpoint of the operator's slices.
type endpoint struct {
	addr, pod, node string
	ready           bool
}

func (e *cluster) endpoints(t *testing.T) []endpoint {
	t.Helper()
	out, err := e.endpointsNoFail()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *cluster) endpointsNoFail() ([]endpoint, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: svcName, discoveryv1.LabelManagedBy: "endpointslice-controller.kubefstack.io"}); err != nil {
		return nil, err
	}
	var out []endpoint
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			x := endpoint{ready: ep.Conditions.Ready != nil && *ep.Conditions.Ready}
			if len(ep.Addresses) > 0 {
				x.addr = ep.Addresses[0]
			}
			if ep.TargetRef != nil {
				x.pod = ep.TargetRef.Name
			}
			if ep.NodeName != nil {
				x.node = *ep.NodeName
			}
			out = append(out, x)
		}
	}
	return out, nil
}

func (e *cluster) readyEndpoints(t *testing.T) []endpoint {
	t.Helper()
	var out []endpoint
	for _, x := range e.endpoints(t) {
		if x.ready {
			out = append(out, x)
		}
	}
	return out
}

// The stack's two replicas land one per worker (topology spread), each with its own address of
// the pool, held by one AddressClaim for the whole cluster; the Service's EndpointSlice lists
// each address with the node its pod runs on.
func testStackSpreadsOverWorkers(t *testing.T) {
	e := mustSetup(t)
	_, workers := e.nodes(t)
	pods := e.waitReady(t, app, 2, 2*time.Minute)
	nodes, addrs := map[string]string{}, map[string]string{}
	for i := range pods {
		p := &pods[i]
		a := servedAddr(t, p)
		if !inPool(a) {
			t.Errorf("pod %s serves %s, outside the pool %s-%s", p.Name, a, poolFrom, poolTo)
		}
		if other, dup := addrs[a]; dup {
			t.Errorf("pods %s and %s both serve %s", other, p.Name, a)
		}
		addrs[a] = p.Name
		if other, dup := nodes[p.Spec.NodeName]; dup {
			t.Errorf("pods %s and %s both run on %s: the spread over workers %v failed", other, p.Name, p.Spec.NodeName, workers)
		}
		nodes[p.Spec.NodeName] = p.Name
		t.Logf("pod %s on %s serves %s", p.Name, p.Spec.NodeName, a)
	}
	for _, c := range e.claims(t) {
		holder, ok := addrs[c.Spec.Address]
		if !ok {
			t.Errorf("AddressClaim %s holds %s, which no pod serves", c.Name, c.Spec.Address)
			continue
		}
		for i := range pods {
			if pods[i].Name == holder && string(pods[i].UID) != c.Spec.PodUID {
				t.Errorf("AddressClaim %s of %s is bound to pod UID %s, not %s's %s", c.Name, c.Spec.Address, c.Spec.PodUID, holder, pods[i].UID)
			}
		}
		delete(addrs, c.Spec.Address)
	}
	for a, p := range addrs {
		t.Errorf("no AddressClaim holds %s, which pod %s serves", a, p)
	}
	err := framework.Poll("the Service's endpoints name each pod's node", time.Minute, time.Second, func() (bool, string, error) {
		eps := e.readyEndpoints(t)
		if len(eps) != len(pods) {
			return false, fmt.Sprintf("%+v", eps), nil
		}
		for _, x := range eps {
			want := ""
			for i := range pods {
				if pods[i].Name == x.pod {
					want = pods[i].Spec.NodeName
					if servedAddr(t, &pods[i]) != x.addr {
						return false, fmt.Sprintf("endpoint %+v: pod serves %s", x, servedAddr(t, &pods[i])), nil
					}
				}
			}
			if want == "" || x.node != want {
				return false, fmt.Sprintf("endpoint %+v: pod's node %q", x, want), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The Service reaches the stack from everywhere a client can be: from the data network (each
// replica on its own worker, across the workers' uplinks), from a client pod on every node
// (kube-proxy on that node leads the ClusterIP to a served address), and through a NodePort of
// the control plane, which runs no replica. The stand-in answers ping only, so TCP is counted
// where it arrives: every connection attempt is one more packet received by a dataplane.
func testServiceFromEveryNode(t *testing.T) {
	e := mustSetup(t)
	controlPlane, workers := e.nodes(t)
	pods := e.waitReady(t, app, 2, 2*time.Minute)
	for i := range pods {
		a := servedAddr(t, &pods[i])
		if !ping(a) {
			t.Errorf("%s (pod %s on %s) does not answer ping from the data network's router %s", a, pods[i].Name, pods[i].Spec.NodeName, e.gateway)
		}
	}
	svc := &corev1.Service{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: svcName}, svc); err != nil {
		t.Fatal(err)
	}
	const attempts = 20
	for _, node := range append([]string{controlPlane}, workers...) {
		before := rxTotal(t, pods)
		name := "mn-client-" + strings.TrimPrefix(node, e.kindName+"-")
		clientPod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  restartPolicy: Never
  tolerations: [{operator: Exists}]
  containers:
  - name: client
    image: %s
    imagePullPolicy: IfNotPresent
    command: [bash, -c, "for i in $(seq %d); do timeout 1 bash -c 'exec 3<>/dev/tcp/%s/80' || true; done"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
`, name, node, e.standin, attempts, svc.Spec.ClusterIP)
		e.apply(t, clientPod)
		err := framework.Poll("client pod "+name+" done", 2*time.Minute, time.Second, func() (bool, string, error) {
			p := &corev1.Pod{}
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
				return false, "", err
			}
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, framework.PodSummary(p), nil
		})
		_, _ = e.kc("delete", "pod", name, "-n", "default", "--ignore-not-found", "--wait=false")
		if err != nil {
			t.Fatal(err)
		}
		got := rxTotal(t, pods) - before
		t.Logf("from a pod on %s: %d connection attempts to %s:80, the dataplanes received %d packets", node, attempts, svc.Spec.ClusterIP, got)
		if got < attempts {
			t.Errorf("from a pod on %s the dataplanes received %d packets for %d connection attempts to the ClusterIP: kube-proxy on %s did not lead it to a served address", node, got, attempts, node)
		}
	}

	// A NodePort of the node that runs no replica: the host dials it as an outside client.
	port := svc.Spec.Ports[0].NodePort
	target := net.JoinHostPort(e.nodeIP(t, controlPlane), strconv.Itoa(int(port)))
	before := rxTotal(t, pods)
	for i := 0; i < attempts; i++ {
		if c, err := net.DialTimeout("tcp", target, 500*time.Millisecond); err == nil {
			c.Close()
		}
	}
	got := rxTotal(t, pods) - before
	t.Logf("NodePort %s on %s (no replica there): %d attempts, the dataplanes received %d packets", target, controlPlane, attempts, got)
	if got < attempts {
		t.Errorf("through NodePort %s of %s the dataplanes received %d packets for %d connection attempts", target, controlPlane, got, attempts)
	}
}
