package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
)

// eventually retries check until it passes or timeout, then fails with its last error.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stack loads a StackInstance from the samples or the injector's test stacks by name, as a
// StackInstance named as in the opted-in namespace.
func stack(t *testing.T, name, as string) *fsv1.StackInstance {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(root, "internal", "inject", "testdata", "stacks", "*.yaml"))
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sis, err := manifest.StackInstances(data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range sis {
			if sis[i].Name == name {
				si := sis[i].DeepCopy()
				si.Namespace, si.Name = optedInNS, as
				return si
			}
		}
	}
	t.Fatalf("no StackInstance %q in the samples", name)
	return nil
}

// ensureStack creates si unless it exists.
func ensureStack(t *testing.T, si *fsv1.StackInstance) {
	t.Helper()
	if err := k8s.Create(context.Background(), si); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create StackInstance %s: %v", si.Name, err)
	}
}

func readPodFile(t *testing.T, path string) *corev1.Pod {
	t.Helper()
	pod, err := manifest.PodFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// wantErr fails unless err is an API error whose message has every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted it; want an error containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err.Error(), p)
		}
	}
}
