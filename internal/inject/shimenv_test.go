package inject

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The injected app container's environment carries none of the shim's variables (every process
// of the container, kubectl exec shells and exec probes included, would load the shim); the
// launcher learns the stack's process count from a name the shim never reads. The app's own
// LD_PRELOAD is kept as it was.
func TestAppContainerEnvCarriesNoShimVariable(t *testing.T) {
	stacks := fixtures.Stacks(t)
	for _, name := range []string{"nginx-vhost", "own-preload"} {
		pod := fixtures.LoadPod(t, name)
		out, _, err := Inject(pod, stacks[StackName(pod)], testConfig())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		env := map[string]string{}
		for _, e := range out.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		for _, n := range podcontract.ShimEnvNames() {
			theApps := n == podcontract.EnvPreload && name == "own-preload"
			if _, set := env[n]; set && !theApps {
				t.Errorf("%s: the app container's environment sets the shim's %s=%q", name, n, env[n])
			}
		}
		if got := env[podcontract.EnvInstances]; got != "2" {
			t.Errorf("%s: %s=%q, want 2 (the stack's processes)", name, podcontract.EnvInstances, got)
		}
		if name == "own-preload" && env[podcontract.EnvPreload] != "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" {
			t.Errorf("own-preload: the app's %s became %q", podcontract.EnvPreload, env[podcontract.EnvPreload])
		}
	}
}

// The shim's variables other than LD_PRELOAD, and the launcher's, are refused in a pod with
// their field path: the launcher would override them for the app and nothing else reads them.
func TestShimVariablesInThePodAreRefused(t *testing.T) {
	stacks := fixtures.Stacks(t)
	for _, n := range []string{podcontract.EnvShimInstances, podcontract.EnvShimProcID, podcontract.EnvShimInitialLcore, podcontract.EnvInstances, podcontract.EnvContainerName} {
		pod := fixtures.LoadPod(t, "nginx-vhost")
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEEP", Value: "1"}, {Name: n, Value: "1"}}
		_, _, err := Inject(pod, stacks[StackName(pod)], testConfig())
		var re *RejectError
		if !errors.As(err, &re) || !slices.ContainsFunc(re.Errs, func(e *field.Error) bool { return e.Field == "spec.containers[0].env[1].name" }) {
			t.Errorf("%s in the pod: got %v, want a refusal at spec.containers[0].env[1].name", n, err)
		}
	}
}
