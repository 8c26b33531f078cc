package render_test

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// TestPropertyValidSpecsRoundTrip renders generated valid specs and reads every file back with
// F-Stack's rules: each must be accepted and say exactly what the spec and facts say.
func TestPropertyValidSpecsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(20261121))
	var maxProcs int32
	split := 0  // specs whose ports are served by different processes
	shared := 0 // specs whose lcores share CPUs (lab option lcoresPerCPU)
	for i := 0; i < 2000; i++ {
		data := make([]byte, 256)
		rng.Read(data)
		g := &gen{data: data}
		g.build()
		before := g.spec.DeepCopy()
		spec, res, err := render.RenderDefaulted(&g.spec, &g.facts)
		if err != nil {
			t.Fatalf("case %d: a valid spec was refused: %v\nspec: %+v", i, err, g.spec)
		}
		maxProcs = max(maxProcs, g.spec.Processes)
		if len(g.facts.DataplaneCPUs) < int(g.spec.Processes) {
			shared++
		}
		if len(g.spec.Ports) > 1 && !reflect.DeepEqual(g.spec.Ports[0].Processes, g.spec.Ports[1].Processes) {
			split++
		}
		if !reflect.DeepEqual(before, &g.spec) {
			t.Fatalf("case %d: Render modified its input", i)
		}
		assertConforms(t, spec, &g.facts, res.Config, res)
		// The dataplane renders the injector's snapshot, the spec with every default (the
		// profile's too) applied: it must get the very file, and so the hash, admission got.
		if again, err := render.RenderRaw(spec, &g.facts); err != nil {
			t.Errorf("case %d: the defaulted spec is refused: %v", i, err)
		} else if string(again.Config) != string(res.Config) {
			t.Errorf("case %d: the defaulted spec renders differently:\n%s", i, again.Config)
		}
		if t.Failed() {
			t.Fatalf("case %d failed; config:\n%s", i, res.Config)
		}
	}
	if maxProcs != 64 || split < 200 || shared < 100 {
		t.Errorf("the generator must reach the CRD's 64 processes, split ports between processes and share CPUs between lcores: max %d processes, %d split specs, %d shared", maxProcs, split, shared)
	}
}

// FuzzRender: any spec either renders to a file F-Stack accepts and that says what the spec
// says, or is refused with field paths; nothing panics.
func FuzzRender(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("kube-fstack"))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte(strings.Repeat("\xff\x00\x07", 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data, wild: true}
		g.build()
		spec, res, err := render.RenderDefaulted(&g.spec, &g.facts)
		if err != nil {
			var ve *render.ValidationError
			if !errors.As(err, &ve) || len(ve.Errs) == 0 {
				t.Fatalf("error without field errors: %v", err)
			}
			for _, e := range ve.Errs {
				if !strings.HasPrefix(e.Field, "spec") {
					t.Fatalf("error without a spec field path: %v", e)
				}
			}
			return
		}
		assertConforms(t, spec, &g.facts, res.Config, res)
	})
}
