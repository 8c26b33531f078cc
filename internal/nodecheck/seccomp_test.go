package nodecheck

import (
	"os"
	"path/filepath"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestSeccompProfileCheck(t *testing.T) {
	want := []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`)
	dir := t.TempDir()
	file := filepath.Join(dir, podcontract.SeccompProfileFile)
	for _, tc := range []struct {
		name   string
		setup  func()
		dir    string
		status Status
	}{
		{"unconfigured", func() {}, "", Fail},
		{"missing", func() {}, dir, Fail},
		{"edited", func() { mustWrite(t, file, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`)) }, dir, Fail},
		{"a symlink to the right bytes", func() {
			other := filepath.Join(t.TempDir(), "p.json")
			mustWrite(t, other, want)
			_ = os.Remove(file)
			if err := os.Symlink(other, file); err != nil {
				t.Fatal(err)
			}
		}, dir, Fail},
		{"installed", func() { _ = os.Remove(file); mustWrite(t, file, want) }, dir, Pass},
	} {
		tc.setup()
		c := seccompProfile(tc.dir, want)
		if c.Status != tc.status || c.Label != fsv1.NodeLabelSeccomp {
			t.Errorf("%s: got %s (%s) label %q, want %s", tc.name, c.Status, c.Detail, c.Label, tc.status)
		}
		if c.Status == Fail && c.Fix == "" {
			t.Errorf("%s: a failed check says no fix", tc.name)
		}
	}
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
