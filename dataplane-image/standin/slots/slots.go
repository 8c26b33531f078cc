// Package slots is the stand-in image's count of its shim's free contexts: the stand-in shim
// (dataplane-image/standin/shim, contexts.c) holds a slot of a file per F-Stack instance where
// F-Stack's shim holds one of the instance's ff_socket_ops_zone memzone, and the stand-in's
// supervisor reads the files as the product's reads the zones (--shim-contexts=standin, which
// only the stand-in image's main knows).
package slots

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// Kind is the --shim-contexts value of the slot files.
const Kind = "standin"

// maxSlots is the slots per instance, as F-Stack's zone has at most 32 contexts.
const maxSlots = 32

// Maker makes a generation's source in the primary's runtime directory (runtimeDir/prefix), its
// files appearing delay after each reset: the supervisor's Config.ContextKinds entry of Kind.
func Maker(delay time.Duration) func(runtimeDir, prefix string) contexts.ContextSource {
	return func(runtimeDir, prefix string) contexts.ContextSource {
		return NewSource(filepath.Join(runtimeDir, prefix), delay)
	}
}

// source counts the stand-in shim's slots: one file of 32 bytes per instance in the
// primary's runtime directory, a byte per slot (0 free, 1 held). The supervisor creates them
// empty at each generation, delay after its first process is up: F-Stack's primary creates its
// zones inside ff_init, after its port is up (docs/fstack-rules.md §9; without patch 0004 that
// took seconds, with it they are there when the process is up), and the stand-in keeps a short
// gap so that whoever reads them too early meets files not there yet.
type source struct {
	dir   string
	n     int
	delay time.Duration

	mu      sync.Mutex
	pending *time.Timer
	err     error // creating the files failed
}

// NewSource reads the stand-in's slot files in dir, which appear delay after a reset.
func NewSource(dir string, delay time.Duration) contexts.ContextSource {
	return &source{dir: dir, delay: delay}
}

// SlotFile is the stand-in's slot file of instance k (the stand-in shim's contexts.c
// opens the same name).
func SlotFile(k int) string { return fmt.Sprintf("kube_fstack_standin_contexts_%d", k) }

func (s *source) Name() string {
	return "the stand-in's slot files " + filepath.Join(s.dir, SlotFile(0)) + "..."
}

func (s *source) Reset(_, instances int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		s.pending.Stop()
	}
	s.n, s.err = instances, nil
	for k := 0; k < instances; k++ {
		if err := os.Remove(filepath.Join(s.dir, SlotFile(k))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stand-in shim contexts: %w", err)
		}
	}
	if s.delay <= 0 {
		return s.create(instances)
	}
	s.pending = time.AfterFunc(s.delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.err = s.create(instances)
	})
	return nil
}

func (s *source) create(instances int) error {
	for k := 0; k < instances; k++ {
		if err := fsutil.WriteAtomic(filepath.Join(s.dir, SlotFile(k)), make([]byte, maxSlots), 0o666); err != nil {
			return fmt.Errorf("stand-in shim contexts: %w", err)
		}
	}
	return nil
}

func (s *source) Read() ([]shimctx.Instance, error) {
	s.mu.Lock()
	n, err := s.n, s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([]shimctx.Instance, n)
	for k := range out {
		// The slot files are in the runtime dir, which the apps' secondaries write.
		b, err := fsutil.ReadFileBeneath(s.dir, SlotFile(k), maxSlots)
		if err != nil {
			return nil, err
		}
		if len(b) != maxSlots {
			return nil, fmt.Errorf("%s has %d bytes, want %d", SlotFile(k), len(b), maxSlots)
		}
		out[k].Capacity = maxSlots
		for _, c := range b {
			if c == 0 {
				out[k].Free++
			}
		}
	}
	return out, nil
}
