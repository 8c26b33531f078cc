package slots

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// An app's secondary can write /var/run/dpdk: a FIFO as one of the stand-in's slot files must
// not stop the supervisor's reading of the contexts.
func TestAFIFOAsAStandinSlotIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rte")
	mustDo(t, os.MkdirAll(dir, 0o755))
	mustDo(t, unix.Mkfifo(filepath.Join(dir, SlotFile(0)), 0o644))
	src := &source{dir: dir, n: 1}
	var err error
	done := make(chan struct{})
	go func() { defer close(done); _, err = src.Read() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stand-in's slot read never returned: a planted FIFO blocked it")
	}
	if err == nil || !strings.Contains(err.Error(), "a FIFO") {
		t.Fatalf("stand-in slots: %v", err)
	}
}
