package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func withDrain(d *int32) fixtures.StackOption {
	return func(si *fsv1.StackInstance) { si.Spec.DrainSeconds = d }
}

// Every app container gets a preStop sleep of the stack's drain (default 10 s) unless it has its
// own preStop, and the grace period is raised to cover the drain and the stop after it; no drain
// (0) adds no hook and keeps the API's default grace period.
func TestDrainPreStopAndGracePeriod(t *testing.T) {
	stop := podcontract.TerminationGracePeriodSeconds()
	for _, c := range []struct {
		name      string
		drain     *int32
		grace     *int64
		ownHook   bool
		wantSleep int64
		wantGrace *int64
	}{
		{name: "default", wantSleep: podcontract.DefaultDrainSeconds}, // 10+13 s fit in the API's 30 s
		{name: "long drain, no grace period", drain: new(int32(60)), wantSleep: 60, wantGrace: new(60 + stop)},
		{name: "short grace period raised", grace: new(int64(5)), wantSleep: podcontract.DefaultDrainSeconds,
			wantGrace: new(podcontract.DefaultDrainSeconds + stop)},
		{name: "long grace period kept", drain: new(int32(20)), grace: new(int64(600)), wantSleep: 20, wantGrace: new(int64(600))},
		{name: "no drain", drain: new(int32(0))},
		{name: "own preStop kept", ownHook: true, wantSleep: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := fixtures.LoadPod(t, "two-apps")
			pod.Spec.TerminationGracePeriodSeconds = c.grace
			own := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain"}}}
			if c.ownHook {
				pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: own}
			}
			out, _, err := Inject(pod, fixtures.Stack(t, "two-apps", withDrain(c.drain)), testConfig())
			if err != nil {
				t.Fatal(err)
			}
			for i, ctr := range out.Spec.Containers {
				var hook *corev1.LifecycleHandler
				if ctr.Lifecycle != nil {
					hook = ctr.Lifecycle.PreStop
				}
				switch {
				case c.ownHook && i == 0:
					if hook == nil || hook.Exec == nil || hook.Exec.Command[0] != "/bin/drain" || hook.Sleep != nil {
						t.Errorf("container %s: its own preStop was replaced by %+v", ctr.Name, hook)
					}
				case c.wantSleep == 0:
					if hook != nil {
						t.Errorf("container %s: preStop %+v with no drain", ctr.Name, hook)
					}
				default:
					want := c.wantSleep
					if want < 0 {
						want = podcontract.DefaultDrainSeconds
					}
					if hook == nil || hook.Sleep == nil || hook.Sleep.Seconds != want {
						t.Errorf("container %s: preStop %+v, want a sleep of %d s", ctr.Name, hook, want)
					}
				}
			}
			for _, ic := range out.Spec.InitContainers {
				if ic.Lifecycle != nil && ic.Lifecycle.PreStop != nil {
					t.Errorf("init container %s got a preStop: the dataplane sidecar stops after the apps anyway", ic.Name)
				}
			}
			g := out.Spec.TerminationGracePeriodSeconds
			if (g == nil) != (c.wantGrace == nil) || g != nil && *g != *c.wantGrace {
				t.Errorf("terminationGracePeriodSeconds %v, want %v", deref(g), deref(c.wantGrace))
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
