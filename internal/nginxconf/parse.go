package nginxconf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Directive is one directive with where it was written. Block is nil for a simple directive.
type Directive struct {
	Name  string
	Args  []string
	File  string
	Line  int
	Block []*Directive
	// IsBlock is set for "name args { ... }", also when the block is empty.
	IsBlock bool
}

// Where is "file:line", the way nginx names a place in its messages.
func (d *Directive) Where() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

// String is the directive as written, without its block.
func (d *Directive) String() string {
	return strings.TrimSpace(d.Name + " " + strings.Join(d.Args, " "))
}

// Limits bound what reading a configuration may cost: the files are the user's.
type Limits struct {
	MaxDepth     int   // nested includes
	MaxFiles     int   // files read in all
	MaxFileBytes int64 // one file
	MaxBytes     int64 // all files
}

// DefaultLimits are far above any real nginx configuration.
var DefaultLimits = Limits{MaxDepth: 16, MaxFiles: 512, MaxFileBytes: 4 << 20, MaxBytes: 32 << 20}

// reader parses a file and the files it includes. Relative include paths are relative to
// confDir, the directory of the main file (nginx's conf prefix).
type reader struct {
	confDir string
	limits  Limits
	files   int
	bytes   int64
}

// ReadFile parses path (absolute) and its includes, expanded in place.
func ReadFile(path string, limits Limits) ([]*Directive, error) {
	r := &reader{confDir: filepath.Dir(path), limits: limits}
	return r.file(path, 0)
}

// ParseString parses src (e.g. the -g directives) as if it were the file named name; includes
// in it are not expanded.
func ParseString(name, src string) ([]*Directive, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &parser{toks: toks, file: name}
	return p.block(false)
}

func (r *reader) file(path string, depth int) ([]*Directive, error) {
	if depth > r.limits.MaxDepth {
		return nil, fmt.Errorf("%s: includes nested deeper than %d (an include loop?)", path, r.limits.MaxDepth)
	}
	if r.files++; r.files > r.limits.MaxFiles {
		return nil, fmt.Errorf("%s: more than %d configuration files", path, r.limits.MaxFiles)
	}
	src, err := r.readBounded(path)
	if err != nil {
		return nil, err
	}
	toks, err := lex(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := &parser{toks: toks, file: path}
	dirs, err := p.block(false)
	if err != nil {
		return nil, err
	}
	return r.expand(dirs, depth)
}

// readBounded reads a regular file of bounded size. Symlinks are followed, as nginx follows
// them (Debian's sites-enabled holds symlinks): the launcher reads, with the app's own rights,
// exactly what nginx itself is about to read, so the bounds are on cost, not on place.
func (r *reader) readBounded(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, r.limits.MaxFileBytes+1))
	if err != nil {
		return "", err
	}
	if int64(len(data)) > r.limits.MaxFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, r.limits.MaxFileBytes)
	}
	if r.bytes += int64(len(data)); r.bytes > r.limits.MaxBytes {
		return "", fmt.Errorf("%s: the configuration files exceed %d bytes in all", path, r.limits.MaxBytes)
	}
	return string(data), nil
}

// expand replaces every include directive, at any depth, by the directives of the files it
// names, in nginx's order (glob matches sorted).
func (r *reader) expand(dirs []*Directive, depth int) ([]*Directive, error) {
	var out []*Directive
	for _, d := range dirs {
		if d.IsBlock {
			inner, err := r.expand(d.Block, depth)
			if err != nil {
				return nil, err
			}
			d.Block = inner
		}
		if d.Name != "include" || d.IsBlock {
			out = append(out, d)
			continue
		}
		if len(d.Args) != 1 {
			return nil, fmt.Errorf("%s: include takes one path", d.Where())
		}
		files, err := r.glob(d.Args[0])
		if err != nil {
			return nil, fmt.Errorf("%s: include %s: %w", d.Where(), d.Args[0], err)
		}
		for _, f := range files {
			inner, err := r.file(f, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
		}
	}
	return out, nil
}

// glob resolves an include's pattern; a pattern without wildcards must name an existing file,
// one with wildcards may match nothing (nginx's rules).
func (r *reader) glob(pattern string) ([]string, error) {
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(r.confDir, pattern)
	}
	if !strings.ContainsAny(pattern, "*?[") {
		if _, err := os.Stat(pattern); err != nil {
			return nil, err
		}
		return []string{pattern}, nil
	}
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	var files []string
	for _, m := range matches {
		// nginx skips directories a wildcard matches.
		if st, err := os.Stat(m); err == nil && !st.IsDir() {
			files = append(files, m)
		}
	}
	return files, nil
}

type parser struct {
	toks []token
	pos  int
	file string
}

var errUnbalanced = errors.New("unbalanced braces")

// block parses directives until the end of input (top level) or the closing brace (inner).
func (p *parser) block(inner bool) ([]*Directive, error) {
	var out []*Directive
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		if t.is("}") {
			if !inner {
				return nil, fmt.Errorf("%s:%d: unexpected \"}\": %w", p.file, t.line, errUnbalanced)
			}
			p.pos++
			return out, nil
		}
		d, err := p.directive()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if inner {
		return nil, fmt.Errorf("%s: unexpected end of file, expecting \"}\": %w", p.file, errUnbalanced)
	}
	return out, nil
}

func (p *parser) directive() (*Directive, error) {
	first := p.toks[p.pos]
	if first.is(";") || first.is("{") {
		return nil, fmt.Errorf("%s:%d: unexpected %q", p.file, first.line, first.text)
	}
	d := &Directive{Name: first.text, File: p.file, Line: first.line}
	for p.pos++; p.pos < len(p.toks); p.pos++ {
		t := p.toks[p.pos]
		switch {
		case t.is(";"):
			p.pos++
			return d, nil
		case t.is("{"):
			p.pos++
			d.IsBlock = true
			inner, err := p.block(true)
			d.Block = inner
			return d, err
		case t.is("}"):
			return nil, fmt.Errorf("%s:%d: unexpected \"}\" in %q", p.file, t.line, d.Name)
		default:
			d.Args = append(d.Args, t.text)
		}
	}
	return nil, fmt.Errorf("%s:%d: %q has no terminating \";\" or \"{\"", p.file, d.Line, d.Name)
}
