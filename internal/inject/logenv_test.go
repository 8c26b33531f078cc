package inject

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The operator's log format and level reach the supervisor and the launchers as the variables
// both read; the defaults add none (the goldens show the default).
func TestLogSettingsReachTheDataplaneAndTheLaunchers(t *testing.T) {
	stacks := fixtures.Stacks(t)
	for _, c := range []struct {
		opts logging.Options
		want map[string]string
	}{
		{logging.Options{}, map[string]string{}},
		{logging.Options{Format: logging.FormatText, Level: "info"}, map[string]string{}},
		{logging.Options{Format: logging.FormatJSON, Level: "debug"}, map[string]string{logging.EnvFormat: "json", logging.EnvLevel: "debug"}},
	} {
		cfg := testConfig()
		cfg.Logging = c.opts
		pod := fixtures.LoadPod(t, "nginx-vhost")
		out, _, err := Inject(pod, stacks[StackName(pod)], cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctr := range append(out.Spec.InitContainers, out.Spec.Containers...) {
			got := map[string]string{}
			for _, e := range ctr.Env {
				if e.Name == logging.EnvFormat || e.Name == logging.EnvLevel {
					got[e.Name] = e.Value
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("%+v: container %s has %v, want %v", c.opts, ctr.Name, got, c.want)
			}
		}
		if !slices.ContainsFunc(out.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == podcontract.DataplaneContainer }) {
			t.Fatalf("no dataplane container among %d init containers", len(out.Spec.InitContainers))
		}
	}
}
