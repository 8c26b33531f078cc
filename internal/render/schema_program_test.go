package render_test

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// programBase is the schema tests' base spec made a native program's: no shim settings and no
// dataplane image (the program's container brings its own).
func programBase(t *testing.T) map[string]any {
	s := loadBase(t)
	s["program"] = map[string]any{"mode": "Nginx", "container": "web"}
	s["shim"] = map[string]any{"enabled": false}
	delete(obj(s, "dataplane"), "image")
	return normalize(s)
}

// TestProgramSchema: spec.program's bounds hold in the CRD and in render.Check alike (the
// pod's spec snapshot never passed the API server), and a program spec passes both.
func TestProgramSchema(t *testing.T) {
	adm := loadAdmission(t)
	base := programBase(t)
	if errs := adm.admit(base); len(errs) > 0 {
		t.Fatalf("the API server refuses the program base: %v", errs.ToAggregate())
	}
	if errs := render.CheckSchema(decodeSpec(t, base)); len(errs) > 0 {
		t.Fatalf("render.Check refuses the program base: %v", errs.ToAggregate())
	}
	cases := map[string]struct {
		mutate func(s map[string]any)
		path   string
	}{
		"no mode":             {func(s map[string]any) { delete(obj(s, "program"), "mode") }, "spec.program.mode"},
		"unknown mode":        {func(s map[string]any) { obj(s, "program")["mode"] = "Forking" }, "spec.program.mode"},
		"container not a DNS": {func(s map[string]any) { obj(s, "program")["container"] = "Web_1" }, "spec.program.container"},
		"container of 64":     {func(s map[string]any) { obj(s, "program")["container"] = strings.Repeat("c", 64) }, "spec.program.container"},
		"shim kernelEvent":    {func(s map[string]any) { obj(s, "shim")["kernelEvent"] = false }, "spec.shim"},
		"shim enabled":        {func(s map[string]any) { obj(s, "shim")["enabled"] = true }, "spec.shim"},
	}
	for name, c := range cases {
		spec := deepCopy(base).(map[string]any)
		c.mutate(spec)
		spec = normalize(spec)
		if errs := adm.admit(spec); len(errs) == 0 {
			t.Errorf("%s: the API server accepts it", name)
		}
		if errs := render.CheckSchema(decodeSpec(t, spec)); !errorAt(errs, c.path) {
			t.Errorf("%s: render.Check does not refuse it at %s: %v", name, c.path, errs.ToAggregate())
		}
	}
}
