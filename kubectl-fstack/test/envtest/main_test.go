// Package envtest runs kubectl-fstack's commands that talk to a cluster against a real
// kube-apiserver and etcd (envtest, KUBEBUILDER_ASSETS from hack/envtest-assets.sh; `make
// test-envtest`), with the project's CRDs installed. No operator runs: the plugin only reads what
// the operator writes, so a test writes it itself (the pod as the webhook injects it, with
// internal/inject as the webhook calls it; the addresses it claims; the StackInstance's status),
// and the operator's suite (operator/test/envtest) proves the operator writes the same. No kubelet or node
// agent runs either: pods' and nodes' statuses are written as they would write them.
package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

const (
	optedInNS = "web"
	plainNS   = "plain"
)

var (
	// k8s is an admin client of the suite's API server.
	k8s     client.Client
	restCfg *rest.Config
	root    = filepath.Join("..", "..", "..")
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test-envtest`, which builds kube-apiserver and finds etcd (hack/envtest-assets.sh)")
		return 1
	}
	env := testenv.Environment(root)
	cfg, err := testenv.Start(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restCfg = cfg
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := fsv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		return 1
	}
	for name, labels := range map[string]map[string]string{
		optedInNS: {fsv1.InjectionLabel: "enabled"},
		plainNS:   nil,
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := k8s.Create(context.Background(), ns); err != nil {
			fmt.Fprintf(os.Stderr, "namespace %s: %v\n", name, err)
			return 1
		}
	}
	return m.Run()
}
