package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Concurrent writes all land, and reads during them never race (go test -race).
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "w%d\n", i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
