// Package golden compares rendered text with the golden files tests keep beside their inputs.
// UPDATE_GOLDEN=1 (make generate) rewrites them instead; a missing or stale golden fails.
package golden

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Update reports whether this run rewrites goldens.
func Update() bool { return os.Getenv("UPDATE_GOLDEN") != "" }

// Compare fails t when got differs from the file at path, or writes got there under Update.
func Compare(t testing.TB, path string, got []byte) {
	t.Helper()
	if Update() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale (-golden +got); UPDATE_GOLDEN=1 refreshes it:\n%s", path, diff)
	}
}

// MustNotExist fails t when path exists (a golden for a result the input no longer gives), or
// removes it under Update.
func MustNotExist(t testing.TB, path string) {
	t.Helper()
	if Update() {
		_ = os.Remove(path)
		return
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("%s exists but the input no longer gives that result: delete it", path)
	}
}
