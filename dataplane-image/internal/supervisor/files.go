package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// bumpGeneration increments the counter in ShimDir before any process starts, so an app that
// recorded an older generation knows its DPDK secondary state belongs to a dead primary.
func bumpGeneration(shimDir string) (int, error) {
	path := filepath.Join(shimDir, podcontract.GenerationFile)
	old := 0
	data, err := fsutil.ReadFileBeneath(shimDir, podcontract.GenerationFile, maxGenerationBytes)
	switch {
	case err == nil:
		if old, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil || old < 0 {
			return 0, fmt.Errorf("generation file %s holds %q, not a generation: remove it (the dataplane container then starts at 1)", path, data)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return 0, fmt.Errorf("generation file: %w", err)
	}
	gen := old + 1
	if err := fsutil.WriteAtomic(path, []byte(strconv.Itoa(gen)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("generation file: %w", err)
	}
	return gen, nil
}

// maxGenerationBytes bounds the generation file: a decimal int and a newline.
const maxGenerationBytes = 32

func writeReady(shimDir string, gen int) error {
	return fsutil.WriteAtomic(filepath.Join(shimDir, podcontract.ReadyFile), []byte(strconv.Itoa(gen)+"\n"), 0o644)
}

func removeReady(shimDir string) error {
	err := os.Remove(filepath.Join(shimDir, podcontract.ReadyFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ShimMode names the directory of ImageShimDir holding the libff_syscall.so built for a shim
// spec: the enabled build flags in a fixed order, or "pipeline" (F-Stack's default) for none.
func ShimMode(sh *fsv1.ShimSpec) string {
	var parts []string
	if sh.KernelEvent != nil && *sh.KernelEvent {
		parts = append(parts, "kernel-event")
	}
	if sh.MultiSC != nil && *sh.MultiSC {
		parts = append(parts, "multi-sc")
	}
	if sh.ThreadSocket {
		parts = append(parts, "thread-socket")
	}
	if sh.Polling {
		parts = append(parts, "polling")
	}
	if len(parts) == 0 {
		return "pipeline"
	}
	return strings.Join(parts, "+")
}

// placeShim copies the image's top-level shim files (the launcher) and, when the spec enables
// the shim, the library of its mode into ShimDir, each atomically with its mode bits kept.
// A missing library is an error when required: without it the app would silently use kernel
// sockets.
func placeShim(imageDir, shimDir string, sh *fsv1.ShimSpec, require bool) (warning string, err error) {
	entries, err := os.ReadDir(imageDir)
	if err != nil && require {
		return "", fmt.Errorf("shim: the image has no %s: %w", imageDir, err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := copyFile(filepath.Join(imageDir, e.Name()), filepath.Join(shimDir, e.Name())); err != nil {
				return "", fmt.Errorf("shim: %w", err)
			}
		}
	}
	if sh.Enabled == nil || !*sh.Enabled {
		return "", nil
	}
	mode := ShimMode(sh)
	lib := filepath.Join(imageDir, mode, podcontract.ShimLibrary)
	if _, err := os.Stat(lib); err != nil {
		msg := fmt.Sprintf("shim: the image has no %s for shim mode %s (it has: %s)", podcontract.ShimLibrary, mode, strings.Join(modeDirs(entries), ", "))
		if require {
			return "", errors.New(msg + "; use an image built with that mode or change spec.shim")
		}
		return msg + "; apps will use kernel sockets", nil
	}
	if err := copyFile(lib, filepath.Join(shimDir, podcontract.ShimLibrary)); err != nil {
		return "", err
	}
	return "", placeShimLibs(filepath.Join(imageDir, podcontract.ShimLibDir), shimDir)
}

// placeShimLibs copies the libraries the shim carries (the image's ImageShimDir/lib, found by the
// shim through its run path $ORIGIN/lib) into ShimDir/lib. The shim volume is the app's to write,
// so lib is made and written beneath a held directory: a symlink planted there is refused, never
// followed. An image whose shim carries nothing (an older one) has no lib directory.
func placeShimLibs(imageLibDir, shimDir string) error {
	entries, err := os.ReadDir(imageLibDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	root, err := fsutil.OpenDir(shimDir)
	if err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	defer root.Close()
	dir, _, err := root.MkdirOpen(podcontract.ShimLibDir, 0o755)
	if err != nil {
		return fmt.Errorf("shim: %w (remove it; the supervisor makes it)", err)
	}
	defer dir.Close()
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(imageLibDir, e.Name()))
		if err != nil {
			return fmt.Errorf("shim: %w", err)
		}
		if err := dir.WriteAtomic(e.Name(), data, 0o644); err != nil {
			return fmt.Errorf("shim: %w", err)
		}
	}
	return nil
}

func modeDirs(entries []os.DirEntry) []string {
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != podcontract.ShimLibDir {
			dirs = append(dirs, e.Name())
		}
	}
	sort.Strings(dirs)
	if len(dirs) == 0 {
		return []string{"none"}
	}
	return dirs
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(dst, data, st.Mode().Perm())
}

// clearStaleSocket removes a vhost-user socket a dead primary left behind. DPDK serves a
// server-mode vhost-user port by binding the path, and a primary that was killed (or crashed)
// never unlinks it, so its successor fails with "Address already in use" and the pod would crash
// loop. The path is this pod's alone (fstack-cni made the directory for it), so a socket nobody
// accepts on is stale; one somebody serves, or a path that is not a socket, is reported instead.
func clearStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("vhost-user socket %s exists and is not a socket (%s); remove it", path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		_ = c.Close()
		return fmt.Errorf("vhost-user socket %s is served by another process; only this pod's dataplane may serve it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the stale vhost-user socket %s: %w", path, err)
	}
	return nil
}
