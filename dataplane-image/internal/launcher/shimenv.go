package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/cpuaffinity"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The shim's variables go to the app's process tree only (podcontract.ShimEnvNames): the
// container's environment has none of them, so a kubectl exec shell, an exec probe or a
// lifecycle hook stays on kernel sockets and never takes one of F-Stack's shim contexts.

// setupError is a refusal no restart fixes: the container exits with ExitConfig.
type setupError struct{ msg string }

func (e *setupError) Error() string { return e.msg }

func (l *Launcher) getenv(name string) string {
	if l.Getenv != nil {
		return l.Getenv(name)
	}
	return os.Getenv(name)
}

// instances is the stack's number of F-Stack processes: podcontract.EnvInstances, set by the
// injection, or FF_NB_FSTACK_INSTANCE in a pod an older injection made; 1 without either, as the
// shim assumes. A value out of range is refused: the container's environment is the pod's.
func (l *Launcher) instances() (int, error) {
	name := podcontract.EnvInstances
	v := l.getenv(name)
	if v == "" {
		name = podcontract.EnvShimInstances
		if v = l.getenv(name); v == "" {
			return 1, nil
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > podcontract.MaxInstances {
		return 0, &setupError{fmt.Sprintf("%s=%q is not a number of F-Stack processes (1-%d): the injection sets it from the StackInstance; remove it from the pod and re-create the pod",
			name, printable(v), podcontract.MaxInstances)}
	}
	return n, nil
}

// shimLibrary is the shim in the shim volume, "" when the dataplane placed none (an image
// without the spec's shim mode, which the supervisor allows only with --require-shim=false):
// the app then runs on kernel sockets, as the supervisor's log says too.
func (l *Launcher) shimLibrary() string {
	lib := filepath.Join(l.ShimDir, podcontract.ShimLibrary)
	if fi, err := os.Stat(lib); err != nil || !fi.Mode().IsRegular() {
		l.log().Warn("no shim library: the app runs on kernel sockets", "path", lib)
		return ""
	}
	return lib
}

// childEnv is the app's environment: the container's (base) with the shim's variables for this
// pod replacing any it had, and the shim ahead of the app's own LD_PRELOAD. A preload that
// already names a libff_syscall.so (a pod from an older injection, whose container environment
// preloads the shim, or an app that brings its own build) is kept as it is: a second copy of
// the shim would hook every call twice.
func (l *Launcher) childEnv(base []string, lib string, instances, cpu int) []string {
	drop := append(podcontract.ShimEnvNames(), podcontract.EnvInstances)
	var env []string
	preload := ""
	for _, e := range base {
		name, value, _ := strings.Cut(e, "=")
		switch {
		case name == podcontract.EnvPreload:
			preload = value
		case !slices.Contains(drop, name):
			env = append(env, e)
		}
	}
	if lib != "" {
		preload = l.withShim(preload, lib)
	}
	if preload != "" {
		env = append(env, podcontract.EnvPreload+"="+preload)
	}
	return append(env,
		podcontract.EnvShimInstances+"="+strconv.Itoa(instances),
		podcontract.EnvShimProcID+"="+strconv.Itoa(podcontract.ShimProcID),
		cpuaffinity.InitialLcoreEnv(cpu))
}

func (l *Launcher) withShim(preload, lib string) string {
	for _, p := range preloadList(preload) {
		if filepath.Base(p) == podcontract.ShimLibrary {
			if p != lib {
				l.log().Warn(podcontract.EnvPreload+" already names another copy of the shim: kept, and this pod's not added", "preloaded", p, "shim", lib)
			}
			return preload
		}
	}
	if preload == "" {
		return lib
	}
	return lib + ":" + preload
}

// preloadList splits LD_PRELOAD as the dynamic loader does: on colons and blanks.
func preloadList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' || r == '\t' })
}

// printable bounds and cleans a value from the pod for a log line.
func printable(s string) string { return clean(s, 64) }

func clean(s string, limit int) string {
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
