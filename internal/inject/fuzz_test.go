package inject

import (
	"errors"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// FuzzInject: for any pod and any sample stack, injection never panics, refuses only with a
// *RejectError, and is idempotent: inject(inject(p)) == inject(p).
func FuzzInject(f *testing.F) {
	for i, name := range fixtures.PodNames() {
		f.Add(fixtures.MustRead(f, "pods/"+name+".yaml"), uint8(i))
	}
	stacks := fixtures.Stacks(f)
	names := make([]string, 0, len(stacks))
	for n := range stacks {
		names = append(names, n)
	}
	sort.Strings(names)
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		pod := &corev1.Pod{}
		if err := yaml.Unmarshal(data, pod); err != nil {
			return
		}
		stack := stacks[names[int(pick)%len(names)]]
		once, _, err := Inject(pod, stack, testConfig())
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || len(re.Errs) == 0 {
				t.Fatalf("refused without field errors: %v", err)
			}
			return
		}
		twice, _, err := Inject(once, stack, testConfig())
		if err != nil {
			t.Fatalf("injecting an injected pod failed: %v", err)
		}
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Fatalf("not idempotent:\n%s", diff)
		}
	})
}

func BenchmarkInject(b *testing.B) {
	stacks := fixtures.Stacks(b)
	for _, name := range []string{"nginx-vhost", "two-apps"} {
		pod := fixtures.LoadPod(b, name)
		stack := stacks[StackName(pod)]
		// What the webhook pays per pod: the StackInstance is prepared once per generation.
		prep, err := Prepare(stack, testConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/prepared", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := prep.Inject(pod); err != nil {
					b.Fatal(err)
				}
			}
		})
		// What a cold call costs: validating and rendering the StackInstance too.
		b.Run(name+"/with-render", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Inject(pod, stack, testConfig()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
