// Command notices writes the third-party notices of Go binaries: for every module a binary links
// (read from the build information the Go linker embeds, so it is what was linked, not what go.mod
// lists) the license files of that module as the module cache holds it, and the Go standard
// library's license. The release puts the file beside each binary it ships (the images, the
// kubectl plugin's archives); a module with no license file fails the run, because shipping it
// without its license is what the file exists to prevent.
//
//	notices [-modcache DIR] [-goroot DIR] [-skip MODULE] -o OUT BINARY...
//
// -modcache and -goroot default to `go env GOMODCACHE` and `go env GOROOT`; -skip (default the
// binaries' own main module, whose license ships as LICENSE beside the notices) may repeat.
package main

import (
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "notices:", err)
		os.Exit(1)
	}
}

type skipList []string

func (s *skipList) String() string     { return strings.Join(*s, ",") }
func (s *skipList) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("notices", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the notices file to write")
	modcache := fs.String("modcache", "", "the Go module cache (default: go env GOMODCACHE)")
	goroot := fs.String("goroot", "", "the Go installation the binaries were built with (default: go env GOROOT)")
	var skip skipList
	fs.Var(&skip, "skip", "a module not to list (default: the binaries' main module); repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("usage: notices [-modcache DIR] [-goroot DIR] [-skip MODULE] -o OUT BINARY")
	}
	var err error
	if *modcache == "" {
		if *modcache, err = goEnv("GOMODCACHE"); err != nil {
			return err
		}
	}
	if *goroot == "" {
		if *goroot, err = goEnv("GOROOT"); err != nil {
			return err
		}
	}
	mods, err := linked(fs.Args(), skip)
	if err != nil {
		return err
	}
	text, err := render(mods, *modcache, *goroot)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(text), 0o644)
}

func goEnv(name string) (string, error) {
	b, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w (pass -%s)", name, err, strings.ToLower(strings.TrimPrefix(name, "GO")))
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("go env %s is empty (pass -%s)", name, strings.ToLower(strings.TrimPrefix(name, "GO")))
	}
	return v, nil
}

// module is one linked module version and the binaries that link it.
type module struct {
	path, version string
	by            []string
}

// linked reads each binary's build information: the Go version and every dependency, replaced
// ones as what replaced them (that is the code linked). The Go standard library is the module
// "std" at the binaries' Go version.
func linked(bins []string, skip []string) ([]*module, error) {
	byKey := map[string]*module{}
	add := func(path, version, bin string) {
		k := path + "@" + version
		m := byKey[k]
		if m == nil {
			m = &module{path: path, version: version}
			byKey[k] = m
		}
		if len(m.by) == 0 || m.by[len(m.by)-1] != bin {
			m.by = append(m.by, bin)
		}
	}
	for _, b := range bins {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			return nil, fmt.Errorf("%s: no Go build information (%w): only Go binaries built with modules can be listed", b, err)
		}
		name := filepath.Base(b)
		skipped := map[string]bool{info.Main.Path: len(skip) == 0}
		for _, s := range skip {
			skipped[s] = true
		}
		add("std", info.GoVersion, name)
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if skipped[d.Path] {
				continue
			}
			if d.Version == "" || strings.HasPrefix(d.Path, ".") || filepath.IsAbs(d.Path) {
				return nil, fmt.Errorf("%s links %s from a local directory: a release links module versions only (drop the replace directive)", b, d.Path)
			}
			add(d.Path, d.Version, name)
		}
	}
	mods := make([]*module, 0, len(byKey))
	for _, m := range byKey {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool {
		if (mods[i].path == "std") != (mods[j].path == "std") {
			return mods[i].path == "std"
		}
		if mods[i].path != mods[j].path {
			return mods[i].path < mods[j].path
		}
		return mods[i].version < mods[j].version
	})
	return mods, nil
}

// licenseFile: the names a module's license and notices go by at its root (LICENSE, LICENSE.md,
// LICENCE, COPYING, NOTICE, PATENTS, ...).
func licenseFile(name string) bool {
	n := strings.ToUpper(name)
	for _, p := range []string{"LICENSE", "LICENCE", "COPYING", "NOTICE", "PATENTS", "UNLICENSE"} {
		if n == p || strings.HasPrefix(n, p+".") || strings.HasPrefix(n, p+"-") || strings.HasPrefix(n, p+"_") {
			return true
		}
	}
	return false
}

// escape is the module cache's spelling of a path or version: each upper-case letter as '!' and
// its lower case, so module paths differing only in case stay apart on any file system.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func render(mods []*module, modcache, goroot string) (string, error) {
	var b strings.Builder
	b.WriteString("Third-party software linked into these binaries, with its license and notice files as each\n" +
		"module ships them. The binaries themselves are kube-fstack's, under the Apache License 2.0 (LICENSE).\n\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "  %s %s\n", m.path, m.version)
	}
	var missing []string
	for _, m := range mods {
		dir := filepath.Join(modcache, escape(m.path)+"@"+escape(m.version))
		name := m.path + " " + m.version
		if m.path == "std" {
			dir, name = goroot, "The Go standard library and runtime, "+m.version
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v (run 'go mod download' for it)", name, err))
			continue
		}
		var files []string
		for _, e := range entries {
			if e.Type().IsRegular() && licenseFile(e.Name()) {
				files = append(files, e.Name())
			}
		}
		if len(files) == 0 {
			missing = append(missing, fmt.Sprintf("%s: no LICENSE, COPYING or NOTICE file in %s", name, dir))
			continue
		}
		sort.Strings(files)
		fmt.Fprintf(&b, "\n%s\n%s (in %s)\n", strings.Repeat("=", 78), name, strings.Join(m.by, ", "))
		for _, f := range files {
			text, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%s\n--- %s ---\n%s", strings.Repeat("-", 78), f, text)
			if len(text) > 0 && text[len(text)-1] != '\n' {
				b.WriteByte('\n')
			}
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%d linked module(s) without a license file to ship:\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
	return b.String(), nil
}
