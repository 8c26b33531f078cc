package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The setup checks read a fake API server (controller-runtime's fake client): namespaces,
// Multus's NetworkAttachmentDefinitions as unstructured objects, DaemonSets. withNAD says whether
// the fake serves NetworkAttachmentDefinitions at all (Multus's CRD installed): the fake client
// guesses a resource for any unstructured kind, so without it a Get answers what the real
// client's discovery-backed RESTMapper answers for a kind no API serves (a no-match error).
func fakeCluster(t *testing.T, withNAD bool, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := fsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range s.AllKnownTypes() {
		scope := meta.RESTScopeNamespace
		if gvk.Kind == "Namespace" || gvk.Kind == "Node" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
	}
	if withNAD {
		s.AddKnownTypeWithName(nadGVK, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(nadGVK.GroupVersion().WithKind(nadGVK.Kind+"List"), &unstructured.UnstructuredList{})
		mapper.AddSpecific(nadGVK, schema.GroupVersionResource{Group: nadGVK.Group, Version: nadGVK.Version, Resource: "network-attachment-definitions"},
			schema.GroupVersionResource{Group: nadGVK.Group, Version: nadGVK.Version, Resource: "network-attachment-definition"}, meta.RESTScopeNamespace)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...)
	if !withNAD {
		b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind() == nadGVK {
				return &meta.NoKindMatchError{GroupKind: nadGVK.GroupKind(), SearchedVersions: []string{nadGVK.Version}}
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	}
	return b.Build()
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func optedIn(name string) *corev1.Namespace {
	return namespace(name, map[string]string{fsv1.InjectionLabel: "enabled"})
}

// fstackNet is the chart's NetworkAttachmentDefinition fstack-net in ns.
func fstackNet(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nadGVK)
	u.SetNamespace(ns)
	u.SetName("fstack-net")
	return u
}

func multusDS(ready, desired int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-multus-ds", Labels: map[string]string{"app": "multus"}},
		Status: appsv1.DaemonSetStatus{NumberReady: ready, DesiredNumberScheduled: desired}}
}

// networkStack is the sample stack with its port naming the chart's NetworkAttachmentDefinition.
func networkStack(t *testing.T, ns, name string) fsv1.StackInstance {
	si := namedStack(t, "vhost-user", ns, name)
	si.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	return si
}

// setupReport is doctor's report on the demo node for stacks and pods, with the setup facts read
// from the fake cluster as doctor reads them.
func setupReport(t *testing.T, c client.Client, stacks []fsv1.StackInstance, pods []corev1.Pod) *DoctorReport {
	t.Helper()
	in := doctorInput{nodes: []corev1.Node{*demoNode()}, stacks: stacks, pods: pods}
	in.setup = readSetup(context.Background(), c, stacks, pods)
	return buildDoctorReport(in)
}

func problemsContaining(r *DoctorReport, sub string) int {
	n := 0
	for _, p := range r.Problems {
		if strings.Contains(p, sub) {
			n++
		}
	}
	return n
}

// A namespace with a StackInstance, or with pods naming a stack, but without the opt-in label:
// the webhook never sees its pods, which run without a dataplane and fail quietly. Doctor fails
// it with the label command; a namespace labelled otherwise ("true") is named with its value.
func TestDoctorNamespaceWithoutOptInLabel(t *testing.T) {
	stacks := []fsv1.StackInstance{namedStack(t, "vhost-user", "web", "demo")}
	pods := []corev1.Pod{stackPod("shop", "cart", "demo")}
	c := fakeCluster(t, true, namespace("web", nil), namespace("shop", map[string]string{fsv1.InjectionLabel: "true"}))
	r := setupReport(t, c, stacks, pods)
	if problemsContaining(r, "namespace web has StackInstance demo but not the label kubefstack.io/injection=enabled") != 1 ||
		problemsContaining(r, "kubectl label namespace web kubefstack.io/injection=enabled --overwrite") != 1 {
		t.Errorf("problems %q: want namespace web's missing label and the command", r.Problems)
	}
	if problemsContaining(r, `namespace shop has 1 pod(s) labelled kubefstack.io/stack but not the label kubefstack.io/injection=enabled, so its pods are created without a dataplane (it is "true")`) != 1 {
		t.Errorf("problems %q: want namespace shop's label value named", r.Problems)
	}
	var out bytes.Buffer
	if err := r.writeTable(&out, doctorTable{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cluster setup: 2 of 2 checks need attention", "  STATUS   CHECK              DETAIL\n  FAIL     namespace-opt-in   ",
		"fix namespace-opt-in: kubectl label namespace web kubefstack.io/injection=enabled --overwrite"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}

	ok := setupReport(t, fakeCluster(t, true, optedIn("web"), optedIn("shop")), stacks, pods)
	if len(ok.Problems) != 0 || len(ok.Setup) != 2 || ok.Setup[0].Status != "pass" {
		t.Errorf("opted-in namespaces: problems %q, setup %+v", ok.Problems, ok.Setup)
	}
}

// A stack whose port names a NetworkAttachmentDefinition that does not exist (the chart's
// networkAttachmentDefinition not enabled, or not for this namespace): Multus fails every pod's
// sandbox. Doctor names it, who names it and the chart values to set.
func TestDoctorMissingNetworkAttachmentDefinition(t *testing.T) {
	stacks := []fsv1.StackInstance{networkStack(t, "web", "demo")}
	missing := setupReport(t, fakeCluster(t, true, optedIn("web"), multusDS(1, 1)), stacks, nil)
	if problemsContaining(missing, "NetworkAttachmentDefinition web/fstack-net does not exist, and web/demo (spec.ports[0].network) name it") != 1 ||
		problemsContaining(missing, "networkAttachmentDefinition.enabled=true, networkAttachmentDefinition.name=fstack-net and web in networkAttachmentDefinition.namespaces") != 1 {
		t.Errorf("problems %q: want the missing NetworkAttachmentDefinition web/fstack-net", missing.Problems)
	}
	present := setupReport(t, fakeCluster(t, true, optedIn("web"), multusDS(1, 1), fstackNet("web")), stacks, nil)
	if len(present.Problems) != 0 {
		t.Errorf("with web/fstack-net present: problems %q", present.Problems)
	}
	// A network in another namespace is looked for there.
	other := networkStack(t, "web", "demo")
	other.Spec.Ports[0].Network.Namespace = "nets"
	elsewhere := setupReport(t, fakeCluster(t, true, optedIn("web"), multusDS(1, 1), fstackNet("web")), []fsv1.StackInstance{other}, nil)
	if problemsContaining(elsewhere, "NetworkAttachmentDefinition nets/fstack-net does not exist") != 1 {
		t.Errorf("problems %q: want nets/fstack-net missing", elsewhere.Problems)
	}
	there := setupReport(t, fakeCluster(t, true, optedIn("web"), multusDS(1, 1), fstackNet("nets")), []fsv1.StackInstance{other}, nil)
	if len(there.Problems) != 0 {
		t.Errorf("with nets/fstack-net present: problems %q", there.Problems)
	}
}

// Multus answering: without Multus's CRD the API server serves no NetworkAttachmentDefinition
// (a failure, when a stack names a network); its DaemonSet not ready on every node is a failure;
// no DaemonSet with upstream's label, though the CRD is served, is a warning only. A stack that
// names no network needs no Multus, and doctor does not look for it.
func TestDoctorMultusAnswering(t *testing.T) {
	stacks := []fsv1.StackInstance{networkStack(t, "web", "demo")}
	noCRD := setupReport(t, fakeCluster(t, false, optedIn("web")), stacks, nil)
	if problemsContaining(noCRD, "the API server does not serve NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1), which web/demo (spec.ports[0].network) name: Multus is not installed") != 1 {
		t.Errorf("problems %q: want Multus not installed", noCRD.Problems)
	}
	notReady := setupReport(t, fakeCluster(t, true, optedIn("web"), fstackNet("web"), multusDS(2, 3)), stacks, nil)
	if problemsContaining(notReady, "Multus DaemonSet kube-system/kube-multus-ds: 2 of 3 ready") != 1 {
		t.Errorf("problems %q: want Multus's DaemonSet not ready", notReady.Problems)
	}
	unlabelled := setupReport(t, fakeCluster(t, true, optedIn("web"), fstackNet("web")), stacks, nil)
	if len(unlabelled.Problems) != 0 {
		t.Errorf("no Multus DaemonSet found but the CRD served: problems %q, want a warning only", unlabelled.Problems)
	}
	warned := false
	for _, c := range unlabelled.Setup {
		warned = warned || c.Name == "multus" && c.Status == "warn"
	}
	if !warned {
		t.Errorf("no Multus DaemonSet found: setup %+v, want a multus warning", unlabelled.Setup)
	}
	ready := setupReport(t, fakeCluster(t, true, optedIn("web"), fstackNet("web"), multusDS(3, 3)), stacks, nil)
	if len(ready.Problems) != 0 {
		t.Errorf("Multus ready: problems %q", ready.Problems)
	}
	// A stack that names no network (a chained conflist gives its attachment): no Multus, no
	// NetworkAttachmentDefinition is needed.
	chained := namedStack(t, "vhost-user", "web", "demo")
	chained.Spec.Ports[0].Network = nil
	plain := setupReport(t, fakeCluster(t, false, optedIn("web")), []fsv1.StackInstance{chained}, nil)
	for _, c := range plain.Setup {
		if c.Name != "namespace-opt-in" {
			t.Errorf("a stack without a network got the setup check %+v", c)
		}
	}
}
