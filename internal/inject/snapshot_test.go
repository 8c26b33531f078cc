package inject

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fixtures"
)

// withTunables gives si n FreeBSD tunables of about 380 bytes each in JSON, every one within
// the schema's bounds.
func withTunables(si *fsv1.StackInstance, n int) *fsv1.StackInstance {
	si.Spec.FreeBSD.Sysctl, si.Spec.FreeBSD.Boot = map[string]string{}, map[string]string{}
	for i := range n {
		m := si.Spec.FreeBSD.Sysctl
		if i >= 250 {
			m = si.Spec.FreeBSD.Boot
		}
		v := strings.Repeat("1", 250)
		if i >= 250 {
			v = v[:128] // FreeBSD's kenv limit for boot tunables
		}
		m[fmt.Sprintf("net.x%03d.%s", i, strings.Repeat("k", 110))] = v
	}
	return si
}

// Issue 23: a spec whose snapshot cannot fit in a pod's annotations is refused, by the
// StackInstance webhook (CheckSnapshotSize) and by the injection of a StackInstance admitted
// before the bound (Prepare), with the field, the size and the room it may take.
func TestSnapshotSize(t *testing.T) {
	fits := withTunables(fixtures.Stacks(t)["vhost-user"], 300)
	if raw, _ := SpecSnapshot(&fits.Spec); len(raw) < 100<<10 {
		t.Fatalf("the fitting spec's snapshot is %d bytes; the test wants one near the bound", len(raw))
	}
	if ferr := CheckSnapshotSize(field.NewPath("spec"), &fits.Spec); ferr != nil {
		t.Fatalf("a %d-tunable spec must fit: %v", 300, ferr)
	}
	if _, err := Prepare(fits, testConfig()); err != nil {
		t.Fatal(err)
	}
	over := withTunables(fixtures.Stacks(t)["vhost-user"], 400)
	ferr := CheckSnapshotSize(field.NewPath("spec"), &over.Spec)
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
