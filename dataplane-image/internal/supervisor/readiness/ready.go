// Package readiness says when a DPDK process of the dataplane counts as started: a primary
// whose EAL init completed (its shared config stamped and locked) and whose ports telemetry
// reports started, a secondary that joined the primary (its IPC socket, the primary's
// hugepages mapped), and an optional command such as ff_traffic. Each check reads files the
// apps can write, so each refuses what is not a small regular file.
package readiness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// RTEMagic is RTE_MAGIC: EAL writes it into the shared config's first word when its init is
// complete, so a config file with another value belongs to a primary still starting.
const RTEMagic = 19820526

// PrimaryState says how far a primary has got; the text is what a timeout reports.
func PrimaryState(runtimeDir, prefix string) error {
	cfg := filepath.Join(runtimeDir, prefix, "config")
	// The runtime dir is the apps' too (their secondaries write it): what sits at config may
	// be a FIFO or a symlink an app planted.
	f, err := fsutil.OpenRegularBeneath(runtimeDir, prefix+"/config")
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no DPDK runtime config yet (%s)", cfg)
	}
	if err != nil {
		return fmt.Errorf("DPDK runtime config: %w", err)
	}
	defer f.Close()
	if !LockHeld(f) {
		return fmt.Errorf("%s exists but no process holds its lock (a primary that died, or not yet started)", cfg)
	}
	var word [4]byte
	if _, err := f.ReadAt(word[:], 0); err != nil {
		return fmt.Errorf("%s: %w", cfg, err)
	}
	if m := binary.NativeEndian.Uint32(word[:]); m != RTEMagic {
		return fmt.Errorf("EAL init not finished (%s magic %d)", cfg, m)
	}
	return nil
}

// LockHeld asks whether some process holds the write lock a DPDK primary keeps on its config
// for as long as it lives; a stale file from a dead primary has none.
func LockHeld(f *os.File) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// TelemetryAnswers checks the primary serves its telemetry socket, has started every port of
// the rendered port_list, and, for each check ("command" or "command~text"), answers the command
// with a reply (containing text). peer says which process may serve the socket: the primary.
//
// The ports matter because a primary creates its shared pools and rings before it starts its
// ports (F-Stack's ff_msg_pool, testpmd's mb_pool_0): a secondary let in at that point would
// poll queues the primary is still setting up.
func TelemetryAnswers(runtimeDir, prefix string, ports []int, checks []string, peer telemetry.Peer) error {
	c, err := telemetry.Dial(telemetry.SocketPath(runtimeDir, prefix), time.Second, peer)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range ports {
		started, err := c.EthdevStarted(p)
		if err != nil {
			return err
		}
		if !started {
			return fmt.Errorf("port %d not started yet (telemetry /ethdev/info,%d dev_started 0)", p, p)
		}
	}
	for _, check := range checks {
		cmd, want, _ := strings.Cut(check, "~")
		reply, err := c.Command(cmd)
		if err != nil {
			return err
		}
		if r := string(reply); r == "[]" || r == "{}" || !strings.Contains(r, want) {
			return fmt.Errorf("telemetry %s answers %s, not yet %q", cmd, r, want)
		}
	}
	return nil
}

// SecondaryJoined reports whether a secondary with this pid has joined the primary: its IPC
// socket in the runtime directory (mp_socket_<pid>_<tsc>) and, when memory is on hugepages, the
// primary's hugepage files mapped (EAL's memory init, the step that fails across containers).
func SecondaryJoined(runtimeDir, hugeDir, prefix string, pid int) error {
	pattern := filepath.Join(runtimeDir, prefix, "mp_socket_"+strconv.Itoa(pid)+"_*")
	if m, _ := filepath.Glob(pattern); len(m) == 0 {
		return fmt.Errorf("no %s yet: the secondary has not joined the primary", pattern)
	}
	if hugeDir == "" {
		return nil
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return fmt.Errorf("secondary's memory maps: %w", err)
	}
	if file := filepath.Join(hugeDir, prefix+"map_"); !strings.Contains(string(maps), file) {
		return fmt.Errorf("the secondary has not mapped the primary's hugepages (%s*) yet", file)
	}
	return nil
}

// ReadyCommand runs the configured probe for process k (F-Stack: ff_traffic -p k -s).
func ReadyCommand(ctx context.Context, argv []string, k int) error {
	if len(argv) == 0 {
		return nil
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = strings.ReplaceAll(a, "{proc}", strconv.Itoa(k))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
