package launcher

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Before the app starts, the launcher proves that the program will load with the shim in this
// container. A shared library the shim needs and the image lacks is fatal to the dynamic loader
// for every program preloading it (exit 127, "error while loading shared libraries"), and a
// program the loader never sees (static, or musl's) silently keeps kernel sockets. So the
// launcher reads the program's ELF header, refuses what can never load a glibc shim, and asks
// glibc's loader to list what it would load (LD_TRACE_LOADED_OBJECTS: the loader maps every
// object, resolves every dependency and symbol version, and exits before any constructor or the
// program runs), refusing with what is missing and whose it is.

const (
	// traceTimeout bounds the loader's listing, which takes milliseconds.
	traceTimeout = 10 * time.Second
	// traceOutputMax bounds what is kept of the listing (each stream).
	traceOutputMax = 64 << 10
	// maxScriptDepth is how many #! interpreters are followed, as the kernel does.
	maxScriptDepth = 4
)

// proveShimLoads checks that argv0, started with env (whose LD_PRELOAD holds lib), loads the
// shim; a *setupError says what is missing otherwise.
func (l *Launcher) proveShimLoads(ctx context.Context, argv0 string, env []string, lib string) error {
	path, err := exec.LookPath(argv0)
	if err != nil {
		return nil // starting it fails the same way, and says so
	}
	prog, why, err := loadedProgram(path, maxScriptDepth)
	if err != nil {
		return err
	}
	if prog == "" {
		l.log().Warn("cannot check that the shim loads with the app: "+why, "path", path)
		return nil
	}
	withShim, err := traceLoad(ctx, prog, traceEnv(env, ""))
	if err != nil {
		return err
	}
	withShim.errors = slices.DeleteFunc(withShim.errors, func(e string) bool {
		// A preload of the app's own the loader skips costs the app nothing the shim causes.
		if strings.Contains(e, "cannot be preloaded") && !strings.Contains(e, "'"+lib+"'") {
			l.log().Warn(e)
			return true
		}
		return false
	})
	if len(withShim.missing) == 0 && len(withShim.errors) == 0 {
		l.log().Info("the shim loads with "+prog, "libraries", shimSources(lib, withShim.resolved))
		return nil
	}
	// Without the shim (the app's own preloads kept), what is still missing is the app's.
	without, err := traceLoad(ctx, prog, traceEnv(env, lib))
	if err != nil {
		return err
	}
	return &setupError{l.cannotLoad(prog, lib, withShim, without)}
}

// loadedProgram is the ELF program the kernel hands to the dynamic loader when path is executed,
// following #! lines, or "" and why it cannot tell; a program that can never load the glibc
// shim is a *setupError.
func loadedProgram(path string, depth int) (prog, why string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err.Error(), nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) == 0 || depth == 0 {
			return "", "a #! line without an interpreter, or too many of them", nil
		}
		interp := fields[0]
		// "#!/usr/bin/env bash": what runs under the shim is bash.
		if filepath.Base(interp) == "env" && len(fields) == 2 && !strings.HasPrefix(fields[1], "-") {
			if p, err := exec.LookPath(fields[1]); err == nil {
				interp = p
			}
		}
		return loadedProgram(interp, depth-1)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		// The loader runs it in secure mode, which may ignore the listing request and run it.
		return "", "it is set-user-ID or set-group-ID (the loader's secure mode also ignores " + podcontract.EnvPreload + " paths outside its trusted directories)", nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", "it is neither an ELF program nor a #! script", nil
	}
	defer ef.Close()
	interp, err := interpreter(ef)
	if err != nil {
		return "", "", &setupError{fmt.Sprintf("%s: %v", path, err)}
	}
	switch base := filepath.Base(interp); {
	case interp == "":
		return "", "", &setupError{fmt.Sprintf("%s is statically linked (it has no ELF interpreter): the dynamic loader never runs for it, so %s cannot load F-Stack's shim and it would use kernel sockets; run a dynamically linked, glibc-based build of it", path, podcontract.EnvPreload)}
	case strings.Contains(base, "musl"):
		return "", "", &setupError{fmt.Sprintf("%s is built for the musl C library (ELF interpreter %s): an Alpine/musl image can never load the glibc shim; use a glibc-based image (Debian, Ubuntu, RHEL...)", path, interp)}
	case !isGlibcLoader(base):
		return "", "", &setupError{fmt.Sprintf("%s's ELF interpreter is %s, not glibc's (ld-linux*.so.*): F-Stack's shim is built for glibc; use a glibc-based image (Debian, Ubuntu, RHEL...)", path, interp)}
	}
	if _, err := os.Stat(interp); err != nil {
		return "", "", &setupError{fmt.Sprintf("%s's ELF interpreter %s is not in this image, so it cannot run here at all: fix the app image", path, interp)}
	}
	return path, "", nil
}

// interpreter is the program's PT_INTERP, "" for a static program.
func interpreter(ef *elf.File) (string, error) {
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		if p.Filesz == 0 || p.Filesz > 4096 {
			return "", fmt.Errorf("its ELF interpreter entry is %d bytes long", p.Filesz)
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("read its ELF interpreter: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// isGlibcLoader: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-linux.so.2; ld64.so.* on
// ppc64 and s390x.
func isGlibcLoader(base string) bool {
	return strings.HasPrefix(base, "ld-linux") && strings.Contains(base, ".so.") || strings.HasPrefix(base, "ld64.so.")
}

// traceEnv is the environment of a listing: the app's, without the shim's other variables
// (nothing of the shim runs, but nothing could attach either), without drop in LD_PRELOAD, and
// with nothing else that changes what the loader prints.
func traceEnv(env []string, drop string) []string {
	var out []string
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		switch {
		case name == podcontract.EnvPreload:
			list := slices.DeleteFunc(preloadList(value), func(p string) bool { return p == drop })
			if len(list) > 0 {
				out = append(out, name+"="+strings.Join(list, ":"))
			}
		case slices.Contains(podcontract.ShimEnvNames(), name), strings.HasPrefix(name, "LD_TRACE_"),
			name == "LD_DEBUG", name == "LD_VERBOSE", name == "LD_WARN":
		default:
			out = append(out, e)
		}
	}
	return append(out, "LD_TRACE_LOADED_OBJECTS=1")
}

// loadTrace is what the loader's listing says.
type loadTrace struct {
	// missing are the libraries not found ("libnuma.so.1 => not found").
	missing []string
	// errors are the loader's other complaints: a preload it cannot load, a symbol version
	// a library lacks.
	errors []string
	// resolved maps each library found to its path.
	resolved map[string]string
}

func traceLoad(ctx context.Context, prog string, env []string) (*loadTrace, error) {
	ctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	var stdout, stderr boundedBuffer
	cmd := exec.CommandContext(ctx, prog)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("listing what %s loads with the shim (LD_TRACE_LOADED_OBJECTS) did not end within %s", prog, traceTimeout)
	}
	t := parseTrace(stdout.String(), stderr.String())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("list what %s loads with the shim: %w", prog, err)
	}
	if err != nil && len(t.missing) == 0 && len(t.errors) == 0 {
		t.errors = append(t.errors, fmt.Sprintf("the loader's listing failed (%v): %s", err, clean(strings.TrimSpace(stderr.String()), 1024)))
	}
	return t, nil
}

func parseTrace(stdout, stderr string) *loadTrace {
	t := &loadTrace{resolved: map[string]string{}}
	for _, line := range strings.Split(stdout, "\n") {
		name, where, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if !ok {
			continue
		}
		if where == "not found" {
			t.missing = appendNew(t.missing, name)
		} else if path, _, _ := strings.Cut(where, " ("); path != "" {
			t.resolved[name] = path
		}
	}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "cannot be preloaded") || strings.Contains(line, "version `") ||
			strings.Contains(line, "error while loading shared libraries") {
			t.errors = appendNew(t.errors, clean(line, 1024))
		}
	}
	return t
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) || len(list) >= 16 {
		return list
	}
	return append(list, s)
}

// cannotLoad says what is missing and whose it is: with the shim against without it.
func (l *Launcher) cannotLoad(prog, lib string, with, without *loadTrace) string {
	var shims, apps []string
	for _, m := range with.missing {
		if slices.Contains(without.missing, m) {
			apps = append(apps, m)
		} else {
			shims = append(shims, m)
		}
	}
	var parts []string
	if len(shims) > 0 {
		parts = append(parts, fmt.Sprintf("this image lacks %s, which F-Stack's shim needs (%s)", strings.Join(shims, ", "), l.shimLibDirNote()))
	}
	if len(apps) > 0 {
		parts = append(parts, fmt.Sprintf("this image lacks %s, which %s itself needs (it cannot run here even without the shim: fix the app image)", strings.Join(apps, ", "), prog))
	}
	if len(with.errors) > 0 {
		parts = append(parts, "the dynamic loader says: "+strings.Join(with.errors, "; "))
	}
	return fmt.Sprintf("%s cannot start with F-Stack's shim %s in this container, and every program started with it would fail (exit 127): %s; not starting it",
		prog, lib, strings.Join(parts, "; "))
}

// shimLibDirNote says where the shim's own libraries should have come from.
func (l *Launcher) shimLibDirNote() string {
	dir := filepath.Join(l.ShimDir, podcontract.ShimLibDir)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return fmt.Sprintf("the shim's libraries are in %s, and it is not there either: the dataplane image is incomplete, report it", dir)
	}
	return fmt.Sprintf("this dataplane image brings no %s with the shim: use one that does, or add the libraries to the app image", dir)
}

// shimSources says where the shim's own dependencies load from, grouped by directory.
func shimSources(lib string, resolved map[string]string) string {
	ef, err := elf.Open(lib)
	if err != nil {
		return lib
	}
	defer ef.Close()
	needed, _ := ef.ImportedLibraries()
	byDir := map[string][]string{}
	var dirs []string
	for _, n := range needed {
		dir := "an unknown place"
		if p, ok := resolved[n]; ok {
			dir = filepath.Dir(p)
		}
		if _, ok := byDir[dir]; !ok {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], n)
	}
	if len(dirs) == 0 {
		return lib + ", which needs no other library"
	}
	parts := make([]string, 0, len(dirs))
	for _, d := range dirs {
		parts = append(parts, strings.Join(byDir[d], ", ")+" from "+d)
	}
	return lib + " with " + strings.Join(parts, "; ")
}

// boundedBuffer keeps the first traceOutputMax bytes written to it and drops the rest.
type boundedBuffer struct{ bytes.Buffer }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := traceOutputMax - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
