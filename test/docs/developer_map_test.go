package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const developerGuide = "docs/developer/README.md"

// mapRow is one row of the developer guide's map of rooms: its folder (the first cell, without
// a trailing slash) and every backticked name in the row.
type mapRow struct {
	line   int
	folder string
	names  []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// mapOfRooms reads the table under "## The map of rooms" of the guide's text.
func mapOfRooms(text string) []mapRow {
	var rows []mapRow
	in := false
	for n, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## The map of rooms"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			folder := backticked.FindStringSubmatch(cells[1])
			if folder == nil {
				continue
			}
			row := mapRow{line: n + 1, folder: strings.TrimSuffix(folder[1], "/")}
			for _, m := range backticked.FindAllStringSubmatch(line, -1) {
				row.names = append(row.names, strings.TrimSuffix(m[1], "/"))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// unmapped are the packages no row names. A row names a package by its path from the
// repository root, or by its path from the row's folder: the operator/ row's `internal/certs` is
// operator/internal/certs. A parent never covers its children, so a new package needs its own
// name in the map.
func unmapped(rows []mapRow, pkgs []string) []string {
	named := map[string]bool{}
	for _, r := range rows {
		for _, n := range r.names {
			named[n] = true
			named[r.folder+"/"+n] = true
		}
	}
	var out []string
	for _, p := range pkgs {
		if !named[p] {
			out = append(out, p)
		}
	}
	return out
}

// goPackages are the directories of the module that hold .go files (tests included: a suite is a
// package a maintainer must find too), by the go command's rules: testdata and names starting
// with . or _ are not walked. A walk rather than `go list ./...`: it sees packages whose every
// file has a build tag or another GOOS, and needs no toolchain. bin/ holds built tools, not the
// module.
func goPackages(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || rel == "bin") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			set[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestDeveloperMapNamesEveryPackage: the map of rooms is where a maintainer looks up what a
// folder owns; a package it does not name is one nobody is told about. Every row's folder must
// exist too, so a move or a deletion takes its row along.
func TestDeveloperMapNamesEveryPackage(t *testing.T) {
	rows := mapOfRooms(read(t, developerGuide))
	if len(rows) < 10 {
		t.Fatalf("%s: found %d rows under \"## The map of rooms\"; the heading or the table's shape changed", developerGuide, len(rows))
	}
	pkgs := goPackages(t)
	if !slices.Contains(pkgs, "internal/render") || !slices.Contains(pkgs, "operator/cmd/fstack-operator") {
		t.Fatalf("the walk found %d packages, not internal/render and operator/cmd/fstack-operator: it is broken", len(pkgs))
	}
	for _, p := range unmapped(rows, pkgs) {
		t.Errorf("%s, the map of rooms, does not name the package %s: add a row for it (folder, what it owns, who imports it), or name it in backticks in its wing's row (as `internal/...` in the operator/ row)", developerGuide, p)
	}
	for _, r := range rows {
		if _, err := os.Stat(filepath.Join(root, r.folder)); err != nil {
			t.Errorf("%s:%d: the map of rooms has a row for %s, which does not exist: update or remove the row", developerGuide, r.line, r.folder)
		}
	}
}

// The check itself: a package added without a row is reported, one named from its wing's row or
// by its full path is not, and a parent's row does not cover a child.
func TestDeveloperMapCheckFindsAMissingRow(t *testing.T) {
	rows := mapOfRooms("# Guide\n\n## The map of rooms\n\n| folder | owns | imported by |\n|---|---|---|\n" +
		"| `internal/podcontract` | the names | everyone |\n" +
		"| `operator/` | `cmd/`, `internal/certs` | nobody |\n\n## Next\n\n| `internal/later` | not in the map | |\n")
	got := unmapped(rows, []string{"internal/podcontract", "internal/podcontract/snapshot", "operator/internal/certs", "operator/cmd", "internal/later"})
	want := []string{"internal/podcontract/snapshot", "internal/later"}
	if !slices.Equal(got, want) {
		t.Errorf("unmapped = %q, want %q", got, want)
	}
}
