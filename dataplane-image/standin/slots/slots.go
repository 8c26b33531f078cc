// Package slots is the stand-in image's count of its shim's free contexts: the stand-in shim
// (dataplane-image/standin/shim, contexts.c) holds a slot of a file per F-Stack instance where
// F-Stack's shim holds one of the instance's ff_socket_ops_zone memzone, and the stand-in's
// supervisor reads the files as the product's reads the zones (--shim-contexts=standin, which
// only the stand-in image's main knows).
package slots

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// Kind is the --shim-contexts value of the slot files.
const Kind = "standin"

// The slot file: maxSlots bytes (0 free, 1 held), then a holder record of ownerSize bytes per
// slot, {int32 pid, 4 unused, uint64 the inode of the holder's pid namespace}, little-endian,
// which the stand-in shim writes when it takes the slot (contexts.c).
const (
	// maxSlots is the slots per instance, as F-Stack's zone has at most 32 contexts.
	maxSlots  = 32
	ownerOff  = maxSlots
	ownerSize = 16
	fileSize  = maxSlots + maxSlots*ownerSize
)

// reclaimEvery is how often dead holders' slots are given back: fstack looks once a second.
const reclaimEvery = time.Second

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

	// lastReclaim is when dead holders were last looked for; ownNS is this process's pid
	// namespace, where a holder's pid means what it says.
	lastReclaim time.Time
	ownNS       uint64
	alive       func(pid int) bool
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
		if err := fsutil.WriteAtomic(filepath.Join(s.dir, SlotFile(k)), make([]byte, fileSize), 0o666); err != nil {
			return fmt.Errorf("stand-in shim contexts: %w", err)
		}
	}
	return nil
}

func (s *source) Read() ([]shimctx.Instance, error) {
	s.mu.Lock()
	n, err := s.n, s.err
	reclaim := time.Since(s.lastReclaim) >= reclaimEvery
	if reclaim {
		s.lastReclaim = time.Now()
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([]shimctx.Instance, n)
	for k := range out {
		b, err := s.readSlots(k, reclaim)
		if err != nil {
			return nil, err
		}
		out[k].Capacity = maxSlots
		for _, c := range b[:maxSlots] {
			if c == 0 {
				out[k].Free++
			}
		}
	}
	return out, nil
}

// readSlots reads instance k's file and, when reclaim is set, gives back the slots whose
// holders are gone, as F-Stack's fstack does in its loop (patch 0007): the stand-in plays the
// primary here. The file is in the runtime dir, which the apps' secondaries write: it is opened
// only as a regular file beneath the dir, its lock is never waited for, and a holder counts only
// when it was recorded in this process's pid namespace.
func (s *source) readSlots(k int, reclaim bool) ([]byte, error) {
	f, err := fsutil.OpenRegularRWBeneath(s.dir, SlotFile(k))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	locked := reclaim && s.tryLock(f)
	b := make([]byte, fileSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n != fileSize {
		return nil, fmt.Errorf("%s has %d bytes or more, want %d", SlotFile(k), n, fileSize)
	}
	b = b[:fileSize]
	if locked {
		s.reclaimDead(f, b)
	}
	return b, nil
}

// tryLock takes the file's lock as the shim does (flock), without waiting: a process that
// holds it for long only delays the reclaim to the next reading.
func (s *source) tryLock(f *os.File) bool {
	for try := 0; try < 3; try++ {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// reclaimDead frees, in b and in the file (whose lock the caller holds), each held slot whose
// recorded holder is no longer alive.
func (s *source) reclaimDead(f *os.File, b []byte) {
	if s.ownNS == 0 {
		s.ownNS = pidNamespace()
		if s.ownNS == 0 {
			return
		}
	}
	alive := s.alive
	if alive == nil {
		alive = processAlive
	}
	for i := 0; i < maxSlots; i++ {
		rec := b[ownerOff+i*ownerSize : ownerOff+(i+1)*ownerSize]
		pid := int(int32(binary.LittleEndian.Uint32(rec)))
		if b[i] != 1 || pid <= 0 || binary.LittleEndian.Uint64(rec[8:]) != s.ownNS || alive(pid) {
			continue
		}
		none := make([]byte, ownerSize)
		if _, err := f.WriteAt(none, int64(ownerOff+i*ownerSize)); err != nil {
			return
		}
		if _, err := f.WriteAt([]byte{0}, int64(i)); err != nil {
			return
		}
		b[i] = 0
		copy(rec, none)
	}
}

// processAlive: only ESRCH says a process is gone (EPERM is one that exists, a zombie counts).
func processAlive(pid int) bool {
	return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// pidNamespace is the inode of this process's pid namespace; 0 when it cannot be read.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}
