package webhook

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// preparedOf renders the vhost-user sample with n FreeBSD tunables of about 380 bytes each, so
// its size is known.
func preparedOf(t *testing.T, n int) *inject.Prepared {
	t.Helper()
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace("web", "vhost-user"), fixtures.WithTunables(n, ""))
	prep, err := inject.Prepare(si, inject.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return prep
}

// Issue 23: every generation of a StackInstance was kept (up to 4096 renderings of any size).
// Updating one stack keeps one rendering, the latest.
func TestCacheKeepsTheLatestGenerationOnly(t *testing.T) {
	c := newPreparedCache(defaultCacheBytes)
	prep := preparedOf(t, 100)
	for gen := int64(1); gen <= 100; gen++ {
		c.put("stack", gen, prep)
	}
	if n, bytes := c.size(); n != 1 || bytes != prep.Bytes() {
		t.Fatalf("after 100 generations of one stack: %d entries, %d bytes; want 1 entry of %d bytes", n, bytes, prep.Bytes())
	}
	if c.get("stack", 100) != prep || c.get("stack", 99) != nil {
		t.Fatal("want generation 100 kept and 99 gone")
	}
	c.put("stack", 42, preparedOf(t, 1)) // a reader behind the latest: must not replace it
	if c.get("stack", 100) != prep {
		t.Fatal("an older generation replaced the newer one")
	}
}

// Many StackInstances: the entries never hold more than the cache's byte bound.
func TestCacheIsBoundedByBytes(t *testing.T) {
	big := preparedOf(t, 300) // the largest kind of spec admission allows (about 120 KiB)
	if big.Bytes() < 290<<10 {
		t.Fatalf("the big rendering is estimated at %d bytes, want over 290 KiB", big.Bytes())
	}
	const maxBytes = 4 << 20
	c := newPreparedCache(maxBytes)
	for i := range 1000 {
		c.put(types.UID(fmt.Sprint("stack-", i)), 1, big)
		if _, bytes := c.size(); bytes > maxBytes {
			t.Fatalf("after %d stacks the cache holds %d bytes, over its bound of %d", i+1, bytes, maxBytes)
		}
	}
	if n, _ := c.size(); n == 0 {
		t.Fatal("the cache kept nothing")
	}
	tiny := newPreparedCache(big.Bytes() - 1)
	tiny.put("stack", 1, big)
	if n, _ := tiny.size(); n != 0 {
		t.Fatal("a rendering larger than the whole cache was kept")
	}
}
