package release

import (
	"os"
	"testing"
)

// TestMain keeps every cosign this tier runs on the machine: a key-signed release with no
// transparency log needs no Sigstore trust root, but cosign looks up its TUF repository's host
// on each call unless its mirror is a file URL (hack/release.sh sets the same).
func TestMain(m *testing.M) {
	if os.Getenv("TUF_MIRROR") == "" {
		_ = os.Setenv("TUF_MIRROR", "file:///nonexistent/kube-fstack-needs-no-sigstore-tuf")
	}
	os.Exit(m.Run())
}
