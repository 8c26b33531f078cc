package webhook

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// preparedCache keeps the injection's rendering of each StackInstance's latest generation seen,
// so a pod costs no rendering. An older generation is never needed again once a newer one is
// seen (the cache and the live read only move forward), so each StackInstance holds one entry:
// updating a stack 100 times costs one rendering's memory, not 100. StackInstances are many
// and their specs up to inject.MaxSpecSnapshot each, so the entries together are bounded by
// bytes too: one that would pass maxBytes empties the cache first, which costs each stack one
// rendering again rather than tracking ages (deleted StackInstances' entries go the same way).
type preparedCache struct {
	maxBytes int

	mu      sync.Mutex
	entries map[types.UID]preparedEntry
	bytes   int
}

type preparedEntry struct {
	generation int64
	prep       *inject.Prepared
	bytes      int
}

// defaultCacheBytes holds about 80 renderings of the largest spec admission allows, and
// thousands of ordinary ones (a few KiB each), well inside the chart's 256Mi memory limit.
const defaultCacheBytes = 32 << 20

func newPreparedCache(maxBytes int) *preparedCache {
	return &preparedCache{maxBytes: maxBytes, entries: map[types.UID]preparedEntry{}}
}

// get returns the rendering of uid at generation, or nil.
func (c *preparedCache) get(uid types.UID, generation int64) *inject.Prepared {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[uid]; ok && e.generation == generation {
		return e.prep
	}
	return nil
}

// put keeps prep as uid's rendering unless a newer generation is already kept.
func (c *preparedCache) put(uid types.UID, generation int64, prep *inject.Prepared) {
	n := prep.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.entries[uid]
	if ok && old.generation > generation {
		return
	}
	if n > c.maxBytes {
		return // larger than the whole cache: render it per pod
	}
	c.bytes -= old.bytes
	if c.bytes+n > c.maxBytes {
		clear(c.entries)
		c.bytes = 0
	}
	c.entries[uid] = preparedEntry{generation: generation, prep: prep, bytes: n}
	c.bytes += n
}

// size is the number of entries and their estimated bytes.
func (c *preparedCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
