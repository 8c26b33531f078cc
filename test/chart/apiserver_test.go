package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestAPIServer runs the chart against a real kube-apiserver and etcd (envtest, KUBEBUILDER_ASSETS
// from hack/envtest-assets.sh). There is no kubelet or controller-manager: objects are stored and
// validated, no pod runs. cert-manager's and Multus's CRDs are the stubs in testdata/stub-crds.
func TestAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test-chart`, which prepares kube-apiserver and etcd (hack/envtest-assets.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "stub-crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "chart-test", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Before the install: a client dry run of another release would meet its CRDs.
	t.Run("notes-network-attachment-definition", func(t *testing.T) { testNotesNAD(t, kcPath) })
	// Ordered: the install creates the namespace and the CRD the dry runs then meet.
	t.Run("install", func(t *testing.T) { testInstall(t, c, kcPath) })
	t.Run("dry-run", func(t *testing.T) { testDryRun(t, c) })
	t.Run("node-agent-policy", func(t *testing.T) { testNodeAgentPolicy(t, c, cfg) })
	t.Run("operator-configmap-policy", func(t *testing.T) { testOperatorConfigMapPolicy(t, c, cfg) })
	t.Run("operator-endpointslice-policy", func(t *testing.T) { testOperatorEndpointSlicePolicy(t, c, cfg) })
	t.Run("webhook-client-ca-from", func(t *testing.T) { testWebhookClientCAFrom(t, c, kcPath) })
	t.Run("uninstall", func(t *testing.T) { testUninstall(t, c, cfg, kcPath) })
	// After the uninstall: the package is the same release (name, namespace, CRD kept).
	t.Run("packaged", func(t *testing.T) { testPackagedInstall(t, c, kcPath) })
}

// testInstall: the install command of README.md and docs/install.md with the chart's defaults, and what NOTES.txt tells the user.
func testInstall(t *testing.T, c client.Client, kubeconfig string) {
	out, stderr, err := helm(t, "install", release, chartDir, "-n", namespace, "--create-namespace",
		"--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("helm install: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"kubectl label namespace <namespace> kubefstack.io/injection=enabled",
		"kubectl get stackinstances", "rollout status deployment/kube-fstack-operator"} {
		if !strings.Contains(out, want) {
			t.Errorf("NOTES lack %q:\n%s", want, out)
		}
	}
	ctx := context.Background()
	for _, o := range objects(t, render(t, "default")) {
		// A hook is made when its event comes (testUninstall's), but the DataNetwork's is the
		// install's own: made after the CRD the release applied.
		if hook, ok := o.GetAnnotations()["helm.sh/hook"]; ok && !strings.Contains(hook, "post-install") {
			continue
		}
		got := o.NewEmptyInstance().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s %s after helm install: %v", o.GetKind(), o.GetName(), err)
		}
	}
	waitEstablished(t, c, "stackinstances.kubefstack.io")
}

// testNotesNAD: with the NetworkAttachmentDefinition in listed namespaces, the NOTES name it
// where the chart made it (each listed namespace), never in the release namespace where it is
// not. helm prints NOTES only for an install against an API server, hence a client dry run here.
func testNotesNAD(t *testing.T, kubeconfig string) {
	for _, c := range []struct {
		sets      []string
		want, not []string
	}{
		{[]string{"networkAttachmentDefinition.namespaces={web,shop}"},
			[]string{"NetworkAttachmentDefinition fstack-net in namespaces web, shop:", "kubectl get network-attachment-definitions -n web fstack-net",
				"kubectl get network-attachment-definitions -n shop fstack-net", "network: {name: fstack-net} in a stack of web, shop"},
			[]string{namespace + "/fstack-net", "-n " + namespace + " fstack-net"}},
		{nil,
			[]string{"NetworkAttachmentDefinition fstack-net in namespace " + namespace + ":", "network: {name: fstack-net, namespace: " + namespace + "}"},
			nil},
	} {
		args := []string{"install", "notes", chartDir, "-n", namespace, "--dry-run=client", "--kubeconfig", kubeconfig,
			"--set", "networkAttachmentDefinition.enabled=true"}
		for _, s := range c.sets {
			args = append(args, "--set", s)
		}
		out, stderr, err := helm(t, args...)
		if err != nil {
			t.Fatalf("helm install --dry-run=client %v: %v\n%s", c.sets, err, stderr)
		}
		_, notes, ok := strings.Cut(out, "NOTES:")
		if !ok {
			t.Fatalf("no NOTES in:\n%s", out)
		}
		for _, w := range c.want {
			if !strings.Contains(notes, w) {
				t.Errorf("--set %v: NOTES lack %q:\n%s", c.sets, w, notes)
			}
		}
		for _, n := range c.not {
			if strings.Contains(notes, n) {
				t.Errorf("--set %v: NOTES name %q, where the chart made no NetworkAttachmentDefinition:\n%s", c.sets, n, notes)
			}
		}
	}
}

// testDryRun: every object of every value set is accepted in a server-side dry-run apply, which
// checks it against the schema of its kind (unknown fields included).
func testDryRun(t *testing.T, c client.Client) {
	ctx := context.Background()
	for _, set := range valueSets(t) {
		t.Run(set, func(t *testing.T) {
			for _, o := range objects(t, render(t, set)) {
				// Objects the chart puts in other namespaces (the opted-in ones) need them.
				if ns := o.GetNamespace(); ns != "" && ns != namespace {
					err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
				}
				err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll,
					client.ForceOwnership, client.FieldOwner("chart-test"))
				if err != nil {
					t.Errorf("%s %s/%s refused: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
		})
	}
}

// testUninstall: helm uninstall removes the operator but keeps the CRD (crds.keep), so no
// StackInstance of the cluster goes with it.
func testUninstall(t *testing.T, c client.Client, admin *rest.Config, kubeconfig string) {
	done := make(chan error, 1)
	go func() {
		out, stderr, err := helm(t, "uninstall", release, "-n", namespace, "--kubeconfig", kubeconfig)
		if err != nil {
			err = fmt.Errorf("%w\n%s%s", err, out, stderr)
		}
		done <- err
	}()
	testNodeCleanupHook(t, c, admin, done)
	if err := <-done; err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	ctx := context.Background()
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kube-fstack-operator"}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the operator Deployment after helm uninstall: %v, want NotFound", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "stackinstances.kubefstack.io"}, crd); err != nil {
		t.Errorf("the CRD is gone after helm uninstall (crds.keep): %v", err)
	}
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not established within 30s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
