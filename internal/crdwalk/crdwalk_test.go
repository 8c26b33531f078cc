package crdwalk_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/crdwalk"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// TestDefaultsAreTheAPIServers: on every sample and test StackInstance, and on a spec that sets
// none of the objects holding defaults' fields (so defaults apply only where the API server's do),
// crdwalk sets exactly what kube-apiserver's defaulting sets.
func TestDefaultsAreTheAPIServers(t *testing.T) {
	sch, err := crdwalk.Load()
	if err != nil {
		t.Fatal(err)
	}
	adm := fixtures.CRD(t)
	objs := fixtures.SampleObjects(t)
	for name, obj := range fixtures.StackObjects(t) {
		objs[name] = obj
	}
	objs["bare"] = map[string]any{"apiVersion": "kubefstack.io/v1alpha1", "kind": "StackInstance",
		"metadata": map[string]any{"name": "bare"}, "spec": map[string]any{
			"ports": []any{map[string]any{"name": "a", "ipv4": map[string]any{}, "ipv6": map[string]any{}}},
			"vlans": []any{map[string]any{"id": int64(5), "port": "a", "ipv4": map[string]any{}}},
			"dpdk":  map[string]any{}, "kni": map[string]any{}, "dataplane": map[string]any{"hugePages": map[string]any{}},
		}}
	for name, obj := range objs {
		theirs := runtime.DeepCopyJSON(obj)
		adm.Default(theirs)
		ours := runtime.DeepCopyJSON(obj)
		spec, _ := ours["spec"].(map[string]any)
		sch.Default(spec)
		a, _ := json.Marshal(theirs["spec"])
		b, _ := json.Marshal(spec)
		if string(a) != string(b) {
			t.Errorf("%s: the API server defaults to\n%s\ncrdwalk to\n%s", name, a, b)
		}
	}
}

// TestNullIsAbsent: Go writes a required list left empty as null; the API server prunes a null
// from a field that is not nullable, then finds it missing. So does crdwalk.
func TestNullIsAbsent(t *testing.T) {
	sch, err := crdwalk.Load()
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"ports": []any{map[string]any{"name": "a",
		"device": map[string]any{"bond": map[string]any{"mode": float64(0), "members": nil}}}}}
	errs := sch.Validate(spec)
	for _, e := range errs {
		if e.Field == "spec.ports[0].device.bond.members" && e.Type == field.ErrorTypeRequired {
			return
		}
	}
	t.Fatalf("a null required list passes: %v", errs.ToAggregate())
}
