package inject

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/golden"
)

// TestGolden checks golden pairs, as Istio's injector has them: the fixture pod x
// (internal/test/fixtures/pods/x.yaml) and testdata/x.yaml.injected, what injection makes of it, or
// testdata/x.yaml.err, why it is refused.
func TestGolden(t *testing.T) {
	stacks := fixtures.Stacks(t)
	names := fixtures.PodNames()
	if len(names) < 8 {
		t.Fatalf("found %d golden inputs, want at least 8", len(names))
	}
	for _, name := range names {
		gold := filepath.Join("testdata", name+".yaml")
		t.Run(name+".yaml", func(t *testing.T) {
			pod := fixtures.LoadPod(t, name)
			stack := stacks[StackName(pod)]
			if stack == nil {
				stack = stacks["nginx-shim"] // pods that name no stack are never injected
			}
			// A pool stack's pods get the pool's first addresses, as the first pod the webhook
			// admits does.
			out, _, err := injectFirst(pod, stack)
			if err != nil {
				var re *RejectError
				if !errors.As(err, &re) {
					t.Fatalf("want a *RejectError, got %T: %v", err, err)
				}
				golden.Compare(t, gold+".err", []byte(err.Error()+"\n"))
				golden.MustNotExist(t, gold+".injected")
				return
			}
			got, err := yaml.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, gold+".injected", got)
			golden.MustNotExist(t, gold+".err")
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

func injectFirst(pod *corev1.Pod, stack *fsv1.StackInstance) (*corev1.Pod, Decision, error) {
	prep, err := Prepare(stack, testConfig())
	if err != nil {
		return nil, "", err
	}
	return prep.InjectAddresses(pod, prep.FirstAddresses())
}

// TestNoStaleGoldens fails on a golden whose input pod is gone.
func TestNoStaleGoldens(t *testing.T) {
	for _, pattern := range []string{"testdata/*.yaml.injected", "testdata/*.yaml.err"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".injected"), ".err"), ".yaml")
			if !slices.Contains(fixtures.PodNames(), name) {
				t.Errorf("%s has no input internal/test/fixtures/pods/%s.yaml: delete it", f, name)
			}
		}
	}
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ImagePullPolicy = corev1.PullIfNotPresent
	cfg.DefaultDataNetwork = "envtest-net" // as operator/test/envtest, whose pods must equal the goldens
	cfg.StatusTokens = fixtures.StatusTokens()
	return cfg
}
