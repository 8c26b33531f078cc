package docs

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func quickstartStack(t *testing.T) *fsv1.StackInstance {
	t.Helper()
	w := fixtures.LoadWorkload(t, "samples/quickstart/stack.yaml")
	if len(w.StackInstances) != 1 {
		t.Fatalf("quickstart/stack.yaml: %d StackInstances, want 1", len(w.StackInstances))
	}
	return &w.StackInstances[0]
}

// offline is the stack as the injector runs without the operator: a pool's address is assigned by
// the operator's webhook only, so the test gives the pod the pool's first address itself.
func offline(t *testing.T, si *fsv1.StackInstance) *fsv1.StackInstance {
	t.Helper()
	si = si.DeepCopy()
	for i := range si.Spec.Ports {
		p := &si.Spec.Ports[i]
		if p.IPv4 == nil || p.IPv4.From != fsv1.AddressPool {
			continue
		}
		first, _, _ := strings.Cut(p.IPv4.Pool.Ranges[0], "-")
		p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: first + "/24", Gateway: p.IPv4.Gateway}
	}
	return si
}

func inSubnet(t *testing.T, addrOrRange, subnet string) bool {
	t.Helper()
	pfx, err := netip.ParsePrefix(subnet)
	if err != nil {
		t.Fatalf("subnet %q: %v", subnet, err)
	}
	for _, a := range strings.Split(addrOrRange, "-") {
		ip, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil || !pfx.Contains(ip) {
			return false
		}
	}
	return true
}

func injectPod(t *testing.T, what string, pod *corev1.Pod, si *fsv1.StackInstance) {
	t.Helper()
	_, d, err := inject.Inject(pod, si, inject.DefaultConfig())
	if err != nil {
		t.Fatalf("%s: the injector refuses it: %v", what, err)
	}
	if d != inject.Injected {
		t.Fatalf("%s: the injector's decision is %q, want %q", what, d, inject.Injected)
	}
}

// The quickstart's workload, in its namespace with the stack, is one the injector accepts
// (Guaranteed, a command, its probe's named port declared), the Service leads to the stack, and
// the image is a public one with a pinned tag (not the local cluster's localhost/ images).
func TestQuickstartWorkloadIsInjected(t *testing.T) {
	si := quickstartStack(t)
	w := fixtures.LoadWorkload(t, "samples/quickstart/nginx.yaml")
	if len(w.Deployments) != 1 || len(w.ConfigMaps) != 1 {
		t.Fatalf("quickstart/nginx.yaml: %d Deployments, %d ConfigMaps, want 1 and 1", len(w.Deployments), len(w.ConfigMaps))
	}
	d := w.Deployments[0]
	if d.Namespace != si.Namespace || w.ConfigMaps[0].Namespace != si.Namespace {
		t.Errorf("the Deployment (%s) and ConfigMap (%s) are not in the stack's namespace %s", d.Namespace, w.ConfigMaps[0].Namespace, si.Namespace)
	}
	if got := d.Spec.Template.Labels[fsv1.StackLabel]; got != si.Name {
		t.Errorf("the pod template's %s is %q, want the stack %q", fsv1.StackLabel, got, si.Name)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		img := c.Image
		if strings.HasPrefix(img, "localhost/") || !strings.Contains(img[strings.LastIndex(img, "/")+1:], ":") || strings.HasSuffix(img, ":latest") {
			t.Errorf("container %s: image %q: want a public image with a pinned tag", c.Name, img)
		}
	}
	pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	pod.Namespace, pod.Name = d.Namespace, d.Name+"-0"
	injectPod(t, "quickstart/nginx.yaml", pod, offline(t, si))

	sw := fixtures.LoadWorkload(t, "samples/quickstart/service.yaml")
	if len(sw.Services) != 1 {
		t.Fatalf("quickstart/service.yaml: %d Services, want 1", len(sw.Services))
	}
	svc := sw.Services[0]
	if svc.Namespace != si.Namespace || svc.Annotations[fsv1.StackLabel] != si.Name || len(svc.Spec.Selector) != 0 {
		t.Errorf("the Service %s/%s: annotations %v, selector %v; want no selector and %s: %s in %s (docs/reaching-your-stack.md)",
			svc.Namespace, svc.Name, svc.Annotations, svc.Spec.Selector, fsv1.StackLabel, si.Name, si.Namespace)
	}
}

// docs/nginx.md's workload snippet is accepted by the injector with the sample stack it names:
// its probe's named port is one the container declares (the injector refuses a probe on a port
// name the container does not declare).
func TestNginxPageSnippetIsInjected(t *testing.T) {
	var snippet string
	for _, f := range fences(t, "docs/nginx.md") {
		if f.lang == "yaml" && strings.Contains(f.body, "kubefstack.io/stack:") {
			snippet = f.body
			break
		}
	}
	if snippet == "" {
		t.Fatal("docs/nginx.md has no yaml block naming a stack")
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(snippet), pod); err != nil {
		t.Fatalf("docs/nginx.md's snippet is not a pod's metadata and spec: %v\n%s", err, snippet)
	}
	pod.Namespace, pod.Name = "web", "nginx-0"
	si := fixtures.Stack(t, pod.Labels[fsv1.StackLabel], fixtures.InNamespace("web", pod.Labels[fsv1.StackLabel]))
	injectPod(t, "docs/nginx.md", pod, si)
}
