package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// awaitOldSecondaries holds the start of a new primary until no process holds the previous
// primary's runtime files. A DPDK secondary keeps a shared lock on every fbarray_* file of the
// runtime directory for as long as it lives, also after its primary died, and a new primary
// needs those locks exclusively: it dies with "EAL: Cannot allocate memzone list" while an app
// of the dead primary is still attached (docs/fstack-rules.md §9). The generation has already
// moved, so every launcher is stopping its app; the pod shares one PID namespace, so the log
// can name who holds what. Bounded by Timing.SecondariesTimeout.
func (g *generation) awaitOldSecondaries() error {
	s := g.s
	dir := filepath.Join(s.Cfg.Paths.RuntimeDir, g.prefix)
	held := heldRuntimeFiles(dir)
	if len(held) == 0 {
		return nil
	}
	begin := time.Now()
	s.log.Info("waiting for the previous generation's DPDK secondaries to exit (their launchers stop them now that the generation moved)", "holders", describeHolders(held, "/proc"))
	s.health.set("waiting for the previous generation's DPDK secondaries to exit")
	bound := s.Cfg.Timing.SecondariesTimeout
	if bound <= 0 {
		bound = s.Cfg.Timing.StartTimeout
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(s.Cfg.Timing.Poll)
	defer tick.Stop()
	for len(held) > 0 {
		select {
		case <-g.ctx.Done():
			return context.Cause(g.ctx)
		case <-deadline.C:
			return fmt.Errorf("the previous generation's DPDK secondaries still hold its runtime files after %s: %s; a new primary cannot start while they do (EAL: Cannot allocate memzone list): stop them (their container's launcher does when the generation moves)",
				bound, describeHolders(held, "/proc"))
		case <-tick.C:
			held = heldRuntimeFiles(dir)
		}
	}
	s.log.Info("the previous generation's secondaries are gone", "elapsed", time.Since(begin).Round(time.Millisecond).String())
	return nil
}

// heldRuntimeFiles lists the files of a primary's runtime directory that some process still
// locks: fbarray_* (secondaries hold shared flock locks) and config (a primary's fcntl lock).
// The apps' secondaries write the runtime directory: each file is opened beneath it, and only
// a regular file is (fsutil.OpenRegular: a FIFO planted there would block the open).
func heldRuntimeFiles(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "fbarray_*"))
	var held []string
	for _, f := range files {
		if flockHeld(dir, filepath.Base(f)) {
			held = append(held, f)
		}
	}
	if f, err := fsutil.OpenRegularBeneath(dir, "config"); err == nil {
		if readiness.LockHeld(f) {
			held = append(held, filepath.Join(dir, "config"))
		}
		f.Close()
	}
	return held
}

// flockHeld tries the exclusive flock a new primary will need, and gives it back at once.
func flockHeld(dir, name string) bool {
	f, err := fsutil.OpenRegularBeneath(dir, name)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// describeHolders names each held file with the processes /proc/locks says lock it.
func describeHolders(held []string, proc string) string {
	locks := readLocks(filepath.Join(proc, "locks"))
	var parts []string
	for _, f := range held {
		var st unix.Stat_t
		who := "a process this PID namespace cannot see"
		if unix.Stat(f, &st) == nil {
			var names []string
			for _, pid := range locks[lockKey{dev: st.Dev, ino: st.Ino}] {
				names = append(names, fmt.Sprintf("pid %d (%s)", pid, procName(proc, pid)))
			}
			if len(names) > 0 {
				who = strings.Join(names, ", ")
			}
		}
		parts = append(parts, filepath.Base(f)+" held by "+who)
	}
	return strings.Join(parts, "; ")
}

type lockKey struct {
	dev uint64
	ino uint64
}

// readLocks maps each locked file (device, inode) to the PIDs /proc/locks gives for it; PID 0
// (a holder outside this PID namespace) is left out.
func readLocks(path string) map[lockKey][]int {
	out := map[lockKey][]int{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  READ  1234 00:2f:5678 0 EOF"; a waiter has "->" after the id.
		fields := strings.Fields(strings.Replace(sc.Text(), "->", "", 1))
		if len(fields) < 6 {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		id := strings.Split(fields[5], ":")
		if err != nil || pid <= 0 || len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		k := lockKey{dev: unix.Mkdev(uint32(maj), uint32(minor)), ino: ino}
		out[k] = append(out[k], pid)
	}
	return out
}

func procName(proc string, pid int) string {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "comm"))
	if err != nil {
		return "gone"
	}
	return strings.TrimSpace(string(b))
}
