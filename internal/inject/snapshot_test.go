package inject

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Issue 23: a spec whose snapshot cannot fit in a pod's annotations is refused, by the
// StackInstance webhook (CheckSnapshotSize) and by the injection of a StackInstance admitted
// before the bound (Prepare), with the field, the size and the room it may take.
func TestSnapshotSize(t *testing.T) {
	fits := fixtures.Stack(t, "vhost-user", fixtures.WithTunables(300, ""))
	if raw, _ := snapshot.Encode(mustPrepare(t, &fits.Spec).Defaulted()); len(raw) < 100<<10 {
		t.Fatalf("the fitting spec's snapshot is %d bytes; the test wants one near the bound", len(raw))
	}
	if ferr := CheckSnapshotSize(field.NewPath("spec"), mustPrepare(t, &fits.Spec)); ferr != nil {
		t.Fatalf("a %d-tunable spec must fit: %v", 300, ferr)
	}
	if _, err := Prepare(fits, testConfig()); err != nil {
		t.Fatal(err)
	}
	over := fixtures.Stack(t, "vhost-user", fixtures.WithTunables(400, ""))
	ferr := CheckSnapshotSize(field.NewPath("spec"), mustPrepare(t, &over.Spec))
	if ferr == nil || ferr.Field != "spec" || !strings.Contains(ferr.Detail, "131072 bytes (128 KiB)") ||
		!strings.Contains(ferr.Detail, "256 KiB") || !strings.Contains(ferr.Detail, "kubefstack.io/spec") {
		t.Fatalf("want a refusal at spec naming the annotation, the bound and the API server's limit, got %v", ferr)
	}
	_, err := Prepare(over, testConfig())
	var re *RejectError
	if !errors.As(err, &re) || re.Errs[0].Field != "metadata.labels[kubefstack.io/stack]" || !strings.Contains(re.Error(), "128 KiB") {
		t.Fatalf("Prepare: want a refusal at the stack label, got %v", err)
	}
}

// mustPrepare is render.Prepare of a spec the test knows valid.
func mustPrepare(t *testing.T, s *fsv1.StackInstanceSpec) *render.Spec {
	t.Helper()
	checked, errs := render.Prepare(s)
	if len(errs) > 0 {
		t.Fatalf("render.Prepare: %v", errs.ToAggregate())
	}
	return checked
}
