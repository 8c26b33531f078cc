package render_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Each path applies the CRD's defaults (a JSON round trip through internal/crdwalk) once, in
// render.Prepare; what takes the checked spec never again. Before issue 33 the StackInstance
// webhook's validation did it 4 times, a supervisor's start 3 times, inject.Prepare (and with it
// the node requirements) twice.
func TestOneDefaultingPerPath(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user")
	count := func(path string, f func()) {
		t.Helper()
		before := render.Defaultings()
		f()
		if n := render.Defaultings() - before; n != 1 {
			t.Errorf("%s: the spec was defaulted %d times, want once", path, n)
		}
	}
	prepare := func(s *fsv1.StackInstanceSpec) *render.Spec { return render.MustPrepare(t, s) }
	count("StackInstance validation", func() {
		// The webhook's: Prepare, then the snapshot's size and the profile's warnings.
		checked := prepare(&stack.Spec)
		if err := inject.CheckSnapshotSize(nil, checked); err != nil {
			t.Fatal(err)
		}
		_ = checked.Profile()
	})
	count("inject.Prepare", func() {
		prep, err := inject.Prepare(stack, inject.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		_ = prep.NodeRequirements()
	})
	// The pod's snapshot is the checked spec's defaulted form; the supervisor prepares it, reads
	// its facts from it and renders it.
	snapshot := prepare(&stack.Spec).Defaulted().DeepCopy()
	count("supervisor start", func() {
		checked := prepare(snapshot)
		facts := render.PlaceholderFacts(checked)
		if _, err := render.Render(checked, facts); err != nil {
			t.Fatal(err)
		}
	})
	count("node requirements", func() { _ = prepare(&stack.Spec).NodeRequirements() })
}

// A checked spec is shared (the webhook keeps one per StackInstance generation for every pod it
// injects): rendering it never changes it.
func TestRenderLeavesTheCheckedSpecAlone(t *testing.T) {
	for name, si := range fixtures.Stacks(t) {
		checked, errs := render.Prepare(&si.Spec)
		if len(errs) > 0 {
			continue
		}
		before := checked.Defaulted().DeepCopy()
		if _, err := render.Render(checked, render.PlaceholderFacts(checked)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = checked.NodeRequirements()
		if !equality.Semantic.DeepEqual(before, checked.Defaulted()) {
			t.Errorf("%s: rendering changed the checked spec", name)
		}
	}
}

// Each path parses each pool once, in render.Prepare; what takes the checked spec reads its
// pools parsed (Spec.Pool), and nothing outside the renderer can parse one. Before issue 37 an
// IPv4 pool with a gateway was parsed twice by each render (its placeholder address, then the
// gateway's check), so a stack with the two pools below cost 3 parses in validation, 5 in
// inject.Prepare (its render, then the address needs) and 3 in each later render.
func TestOnePoolParsePerPath(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user", func(si *fsv1.StackInstance) {
		p := &si.Spec.Ports[0]
		p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.56.0.1",
			Pool: &fsv1.IPPool{Ranges: []string{"10.56.0.10-10.56.0.20"}, PrefixLength: 24}}
		p.IPv6 = &fsv1.IPv6Address{From: fsv1.AddressPool,
			Pool: &fsv1.IPPool{Ranges: []string{"2001:db8:56::10-2001:db8:56::20"}, PrefixLength: 64}}
	})
	const pools = 2
	count := func(path string, want int64, f func()) {
		t.Helper()
		before := render.PoolParses()
		f()
		if n := render.PoolParses() - before; n != want {
			t.Errorf("%s: %d pool parses, want %d", path, n, want)
		}
	}
	count("StackInstance validation", pools, func() { render.MustPrepare(t, &stack.Spec) })
	count("inject.Prepare, a pod's claims and its injection", pools, func() {
		prep, err := inject.Prepare(stack, inject.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(prep.AddressNeeds()); n != pools || prep.AddressNeeds()[0].Pool == nil {
			t.Fatalf("%d address needs, want the %d pools", n, pools)
		}
		pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithStackLabel(stack.Name))
		if _, _, err := prep.InjectAddresses(pod, prep.FirstAddresses()); err != nil {
			t.Fatal(err)
		}
	})
	checked := render.MustPrepare(t, &stack.Spec)
	count("a render of the checked spec", 0, func() {
		if _, err := render.Render(checked, render.PlaceholderFacts(checked)); err != nil {
			t.Fatal(err)
		}
	})
	if checked.Pool(0, true) == nil || checked.Pool(0, false) == nil || checked.Pool(1, true) != nil {
		t.Errorf("Spec.Pool: want port 0's two pools and none for port 1")
	}
}

// What Render and Placeholder return is the caller's: writing every byte, string, number and
// entry reachable from a Result changes neither the shared checked spec, nor its profile, nor
// its placeholder render. (Before issue 37 Result.Spec was the checked spec itself, and
// Result.Profile and Placeholder the Spec's own.)
func TestResultSharesNothingWithTheSpec(t *testing.T) {
	written, profiles := 0, 0
	for name, si := range fixtures.Stacks(t) {
		checked, errs := render.Prepare(&si.Spec)
		if len(errs) > 0 {
			continue
		}
		// As text, so that the record shares nothing with what it records.
		snapshot := func() string {
			raw, err := json.Marshal([]any{checked.Profile(), checked.Placeholder()})
			if err != nil {
				t.Fatal(err)
			}
			return string(raw)
		}
		spec, before := checked.Defaulted().DeepCopy(), snapshot()
		res, err := render.Render(checked, render.PlaceholderFacts(checked))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		profiles += len(res.Profile)
		written += scribble(reflect.ValueOf(res)) + scribble(reflect.ValueOf(checked.Placeholder())) +
			scribble(reflect.ValueOf(checked.Profile()))
		if !equality.Semantic.DeepEqual(spec, checked.Defaulted()) {
			t.Errorf("%s: writing through a Result changed the checked spec", name)
		}
		if snapshot() != before {
			t.Errorf("%s: writing through a Result changed the Spec's profile or placeholder render", name)
		}
	}
	if written == 0 || profiles == 0 {
		t.Fatalf("wrote %d values, %d of a profile: the samples must reach a Result's every kind of field", written, profiles)
	}
}

// scribble overwrites every exported string, number and bool reachable from v, through
// pointers, slices and maps, and says how many it wrote.
func scribble(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			n = scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			n += scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			n += scribble(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString("scribbled")
		n = 1
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1000)
		n = 1
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() ^ 0x5a)
		n = 1
	case reflect.Bool:
		v.SetBool(!v.Bool())
		n = 1
	}
	return n
}
