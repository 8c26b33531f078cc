package inject

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/golden"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
)

// testStacks are the sample StackInstances plus the test's own, by name.
func testStacks(t testing.TB) map[string]*fsv1.StackInstance {
	t.Helper()
	files, _ := filepath.Glob("../../config/samples/*.yaml")
	more, _ := filepath.Glob("testdata/stacks/*.yaml")
	out := map[string]*fsv1.StackInstance{}
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sis, err := manifest.StackInstances(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range sis {
			out[sis[i].Name] = &sis[i]
		}
	}
	return out
}

func readPod(t testing.TB, path string) *corev1.Pod {
	t.Helper()
	pod, err := manifest.PodFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestGolden checks golden pairs, as Istio's injector has them: testdata/x.yaml is a pod;
// x.yaml.injected is what injection makes of it, or x.yaml.err why it is refused.
func TestGolden(t *testing.T) {
	stacks := testStacks(t)
	inputs, _ := filepath.Glob("testdata/*.yaml")
	if len(inputs) < 8 {
		t.Fatalf("found %d golden inputs, want at least 8", len(inputs))
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			pod := readPod(t, in)
			stack := stacks[StackName(pod)]
			if stack == nil {
				stack = stacks["nginx-shim"] // pods that name no stack are never injected
			}
			out, _, err := Inject(pod, stack, testConfig())
			if err != nil {
				var re *RejectError
				if !errors.As(err, &re) {
					t.Fatalf("want a *RejectError, got %T: %v", err, err)
				}
				golden.Compare(t, in+".err", []byte(err.Error()+"\n"))
				golden.MustNotExist(t, in+".injected")
				return
			}
			got, err := yaml.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, in+".injected", got)
			golden.MustNotExist(t, in+".err")
			again, d, err := Inject(out, stack, testConfig())
			if err != nil || d != SkippedAlreadyInjected && d != SkippedNoStack && d != SkippedOptOut {
				t.Fatalf("injecting the injected pod: decision %q, error %v", d, err)
			}
			if diff := cmp.Diff(out, again); diff != "" {
				t.Fatalf("inject(inject(p)) != inject(p) (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestNoStaleGoldens fails on a golden whose input is gone.
func TestNoStaleGoldens(t *testing.T) {
	for _, pattern := range []string{"testdata/*.yaml.injected", "testdata/*.yaml.err"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			in := strings.TrimSuffix(strings.TrimSuffix(f, ".injected"), ".err")
			if _, err := os.Stat(in); err != nil {
				t.Errorf("%s has no input %s: delete it", f, in)
			}
		}
	}
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ImagePullPolicy = corev1.PullIfNotPresent
	return cfg
}
