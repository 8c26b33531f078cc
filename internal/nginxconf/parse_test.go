package nginxconf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTree writes files (path relative to dir -> content); a content starting with "->" makes
// a symlink to the rest.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestLexQuotingCommentsAndVariables(t *testing.T) {
	src := `log_format main '$remote_addr "$request" \'x\'';  # a comment; with { braces }
add_header X-A "a;b{c}" always;
set $v "${host}x";
return 200 ${scheme}://$host\;;
root /srv/a#b;
`
	toks, err := lex(src)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range toks {
		got = append(got, tk.text)
	}
	want := []string{"log_format", "main", `$remote_addr "$request" 'x'`, ";",
		"add_header", "X-A", "a;b{c}", "always", ";",
		"set", "$v", "${host}x", ";",
		"return", "200", "${scheme}://$host;", ";",
		"root", "/srv/a#b", ";"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tokens\n got %q\nwant %q", got, want)
	}
	if toks[4].line != 2 || toks[len(toks)-1].line != 5 {
		t.Fatalf("lines: add_header on %d (want 2), last on %d (want 5)", toks[4].line, toks[len(toks)-1].line)
	}
}

func TestParseErrorsNameTheFileAndLine(t *testing.T) {
	for src, want := range map[string]string{
		"http {\n  server {\n}\n":     "unexpected end of file",
		"events {}\n}\n":              "x.conf:2: unexpected \"}\"",
		"user nginx\n":                "x.conf:1: \"user\" has no terminating",
		"root \"/a\"b;":               "unexpected 'b' after a quoted string",
		"add_header a 'unterminated;": "unterminated quoted string",
	} {
		_, err := ParseString("x.conf", src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", src, err, want)
		}
	}
}

// Debian's layout: includes by glob relative and absolute, a symlinked site, a directory the
// glob matches, an empty glob.
func TestReadFileExpandsIncludes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"nginx.conf": `user www-data;
include modules-enabled/*.conf;
events { worker_connections 768; }
http {
	include mime.types;
	include ` + dir + `/conf.d/*.conf;
	include sites-enabled/*;
}
`,
		"mime.types":                   "types { text/html html; }\n",
		"conf.d/b.conf":                "server { listen 8081; }\n",
		"conf.d/a.conf":                "server { listen 8080; }\n",
		"conf.d/sub.conf/ignored.conf": "this is a directory the glob matches\n",
		"sites-available/default":      "server {\n\tlisten 80 default_server;\n}\n",
		"sites-enabled/default":        "->../sites-available/default",
	})
	if err := os.MkdirAll(filepath.Join(dir, "modules-enabled"), 0o755); err != nil {
		t.Fatal(err)
	}
	dirs, err := ReadFile(filepath.Join(dir, "nginx.conf"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var http *Directive
	for _, d := range dirs {
		if d.Name == "http" {
			http = d
		}
	}
	var got []string
	for _, d := range http.Block {
		s := d.Name
		if d.Name == "server" {
			s += " " + d.Block[0].String() + " @" + filepath.Base(d.File)
		}
		got = append(got, s)
	}
	want := []string{"types", "server listen 8080 @a.conf", "server listen 8081 @b.conf", "server listen 80 default_server @default"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("http block after includes\n got %q\nwant %q", got, want)
	}
	if l := http.Block[3].Block[0].Line; l != 2 {
		t.Fatalf("the included listen is on line %d of its file, want 2", l)
	}
}

func TestReadFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"loop.conf":    "include loop.conf;\n",
		"missing.conf": "include nothere.conf;\n",
		"big.conf":     strings.Repeat("# padding\n", 200),
		"fifo.conf":    "include /dev/zero;\n",
	})
	small := Limits{MaxDepth: 4, MaxFiles: 10, MaxFileBytes: 1000, MaxBytes: 10000}
	for file, want := range map[string]string{
		"loop.conf":    "includes nested deeper than 4",
		"missing.conf": "missing.conf:1: include nothere.conf",
		"big.conf":     "is larger than 1000 bytes",
		"fifo.conf":    "/dev/zero is not a regular file",
	} {
		_, err := ReadFile(filepath.Join(dir, file), small)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", file, err, want)
		}
	}
}
