package inject

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Every injected pod carries a status token of its own in its dataplane container, 256 random
// bits as hex, which the supervisor asks of /status and /config callers that are not the node.
func TestEveryPodGetsItsOwnStatusToken(t *testing.T) {
	cfg := DefaultConfig() // crypto/rand, as the operator runs
	for _, tc := range []struct{ pod, stack string }{{"nginx-vhost", "vhost-user"}, {"native-nginx", "native-nginx"}} {
		seen := map[string]bool{}
		for range 3 {
			out, d, err := Inject(fixtures.LoadPod(t, tc.pod), fixtures.Stack(t, tc.stack), cfg)
			if err != nil || d != Injected {
				t.Fatalf("%s: %q, %v", tc.pod, d, err)
			}
			tok := StatusToken(out)
			if len(tok) != 2*podcontract.StatusTokenBytes || strings.Trim(tok, "0123456789abcdef") != "" {
				t.Fatalf("%s: token %q, want %d hex digits", tc.pod, tok, 2*podcontract.StatusTokenBytes)
			}
			if seen[tok] {
				t.Fatalf("%s: two pods got the token %s", tc.pod, tok)
			}
			seen[tok] = true
			if n := countTokenVars(out); n != 1 {
				t.Fatalf("%s: %d status token variables, want one, on the dataplane container", tc.pod, n)
			}
		}
	}
}

// A pod keeps its token: injecting it again (a copy, a re-applied manifest) leaves it, and so
// does EnsureStatusToken; the API server keeps a container's environment as it was created.
func TestReinjectionKeepsTheStatusToken(t *testing.T) {
	cfg := DefaultConfig()
	out, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stack(t, "vhost-user"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok := StatusToken(out)
	again, d, err := Inject(out, fixtures.Stack(t, "vhost-user"), cfg)
	if err != nil || d != SkippedAlreadyInjected || StatusToken(again) != tok {
		t.Fatalf("re-injected: %q, %v, token %q, want %q kept", d, err, StatusToken(again), tok)
	}
	if changed, err := EnsureStatusToken(again, cfg); changed || err != nil || StatusToken(again) != tok {
		t.Fatalf("EnsureStatusToken of a pod with a token: changed %v, %v, token %q", changed, err, StatusToken(again))
	}
}

// An injected pod without a valid token (a workload `kubectl fstack inject` wrote, an older
// injector's pod, a hostile value) gets one from EnsureStatusToken, replacing what it had; a pod
// without a dataplane container is left alone.
func TestEnsureStatusTokenFillsWhatIsMissing(t *testing.T) {
	offline := DefaultConfig()
	offline.OmitStatusToken = true
	out, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stack(t, "vhost-user"), offline)
	if err != nil {
		t.Fatal(err)
	}
	if StatusToken(out) != "" || countTokenVars(out) != 0 {
		t.Fatalf("OmitStatusToken injected a token: %q", StatusToken(out))
	}
	bad := out.DeepCopy()
	bad.Spec.InitContainers[0].Env = append(bad.Spec.InitContainers[0].Env, corev1.EnvVar{Name: podcontract.EnvStatusToken, Value: "guessable"})
	for name, pod := range map[string]*corev1.Pod{"none": out, "invalid": bad} {
		changed, err := EnsureStatusToken(pod, DefaultConfig())
		if !changed || err != nil || StatusToken(pod) == "" || countTokenVars(pod) != 1 {
			t.Errorf("%s: changed %v, %v, token %q in %d variables", name, changed, err, StatusToken(pod), countTokenVars(pod))
		}
	}
	plain := fixtures.LoadPod(t, "opt-out")
	if changed, err := EnsureStatusToken(plain, DefaultConfig()); changed || err != nil {
		t.Errorf("a pod without a dataplane: changed %v, %v", changed, err)
	}
	broken := DefaultConfig()
	broken.StatusTokens = strings.NewReader("short")
	if _, err := EnsureStatusToken(bad, broken); err != nil {
		t.Errorf("a pod with a valid token drew another: %v", err)
	}
	if _, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stack(t, "vhost-user"), broken); !errors.As(err, new(*RejectError)) {
		t.Errorf("injection without randomness: %v, want a refusal", err)
	}
}

// A program container (spec.program; the fixture's second) cannot set the token itself: it
// becomes the dataplane.
func TestProgramContainerCannotSetTheStatusToken(t *testing.T) {
	pod := fixtures.LoadPod(t, "native-nginx")
	pod.Spec.Containers[1].Env = append(pod.Spec.Containers[1].Env, corev1.EnvVar{Name: podcontract.EnvStatusToken, Value: strings.Repeat("a", 64)})
	_, _, err := Inject(pod, fixtures.Stack(t, "native-nginx"), DefaultConfig())
	if err == nil || !strings.Contains(err.Error(), podcontract.EnvStatusToken+" is set by the injection") {
		t.Fatalf("got %v, want the variable refused", err)
	}
}

func countTokenVars(pod *corev1.Pod) int {
	n := 0
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, e := range c.Env {
				if e.Name == podcontract.EnvStatusToken {
					n++
				}
			}
		}
	}
	return n
}
