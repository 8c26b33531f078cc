// Package fftool runs F-Stack's ff_* tools the way a container needs them run. Each tool is a
// DPDK secondary whose EAL arguments F-Stack hard-codes: -c1 pins it to CPU 0, which an
// exclusive-CPU container rarely has, and the tools share one message pool, so two at once take
// each other's replies (F-Stack's tools/README.md: "must be executed serially"). The image's
// patch 0006 reads CPUEnv instead of -c1; this package picks that CPU from the tool's own
// affinity and holds one lock file in the DPDK runtime dir for the tool's whole run, so a
// `kubectl exec` of ff_netstat and the supervisor's ff_traffic for the metrics take turns.
package fftool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const (
	// CPUEnv names the CPU the tool's lcore 0 runs on (patch 0006-tools-on-their-own-cpuset).
	CPUEnv = "KUBE_FSTACK_TOOL_CPU"
	// Dir holds F-Stack's tools under their short names (netstat, top, traffic...); the image
	// installs each as ff_<name>, a link to the wrapper.
	Dir = "/usr/local/bin/f-stack"
	// LockFile, in the DPDK runtime dir, is the one lock every tool run holds.
	LockFile = "kube-fstack-tools.lock"
	// DefaultWait bounds how long a tool waits for another to finish: ff_top -n 10 holds the
	// lock ten seconds, a scrape must not wait for ever.
	DefaultWait = 30 * time.Second
)

// nameRE is what the wrapper runs: ff_ and a lower-case name, nothing that walks a path.
var nameRE = regexp.MustCompile(`^ff_[a-z][a-z0-9]{0,31}$`)

// Binary returns the tool that ff_<name> runs, in dir: refused unless the name is one and
// the file is a regular executable (not a link out of dir).
func Binary(dir, name string) (string, error) {
	if !nameRE.MatchString(name) {
		return "", fmt.Errorf("%q is not an F-Stack tool name (ff_netstat, ff_top, ff_traffic...)", name)
	}
	p := filepath.Join(dir, name[len("ff_"):])
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: this image ships no such F-Stack tool (ls %s)", name, dir)
		}
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}

// PickCPU returns the CPU a tool's lcore runs on: the first of allowed (the tool's affinity) in
// the order the launcher gives an app's workers (podcontract.AppCPUs: off the lcores' CPUs, the
// switch's last), else the lowest, since a tool's few milliseconds on a polling CPU only delay
// that lcore while nothing else is allowed. p is the supervisor's placement, nil when unknown.
func PickCPU(allowed []int, p *podcontract.Placement) (int, error) {
	if len(allowed) == 0 {
		return 0, errors.New("the process may run on no CPU")
	}
	cpus, _ := podcontract.AppCPUs(slices.Sorted(slices.Values(allowed)), p)
	return cpus[0], nil
}

// Affinity is the calling thread's CPUs.
func Affinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Env returns env with CPUEnv set to cpu (and no other value of it).
func Env(env []string, cpu int) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return len(kv) > len(CPUEnv) && kv[:len(CPUEnv)+1] == CPUEnv+"="
	})
	return append(out, CPUEnv+"="+strconv.Itoa(cpu))
}

// Lock takes the tools' lock in dir, waiting up to wait for the tool that holds it. The
// returned descriptor holds it and survives exec (no close-on-exec): the lock lasts as long
// as the tool that inherits it. The file is opened without following a link and must be a
// regular file: the runtime dir is shared with the app's containers.
func Lock(dir string, wait time.Duration) (int, error) {
	// DPDK makes its runtime dir on first use; a tool may come first.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, fmt.Errorf("the tools' lock: %w", err)
	}
	p := filepath.Join(dir, LockFile)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return -1, fmt.Errorf("the tools' lock %s: %w (a link there is refused: remove it)", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("the tools' lock %s is not a regular file: remove it", p)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("locking %s: %w", p, err)
		}
		if time.Now().After(deadline) {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("another F-Stack tool has held %s for %s (tools run one at a time: a long ff_top? the supervisor's metrics?); try again", p, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
