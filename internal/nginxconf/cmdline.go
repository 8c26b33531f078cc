package nginxconf

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// IsNginx reports whether argv0 runs Nginx (by its file name, as the kubelet passes it).
func IsNginx(argv0 string) bool {
	b := filepath.Base(argv0)
	return b == "nginx" || b == "nginx-debug"
}

// Command is what an Nginx command line says, read the way nginx's own option parser reads it
// (ngx_get_options): flags may be grouped ("-tq"), -p -c -g -s -e take the rest of their word
// or the next word, and a repeated option keeps its last value.
type Command struct {
	Argv   []string
	Prefix string // -p, empty if not given
	Conf   string // -c, empty if not given
	// Globals is the -g value; globalsAt is the index of the word holding it (-1: none) and
	// globalsAttached tells whether that word is "-g<value>".
	Globals         string
	globalsAt       int
	globalsAttached bool
	// NoServer names the option that makes this command not run a server (-t, -T, -v, -V, -h,
	// -?, -s): such commands pass through untouched.
	NoServer string
}

// ParseCommand reads argv (argv[0] is nginx).
func ParseCommand(argv []string) (*Command, error) {
	c := &Command{Argv: argv, globalsAt: -1}
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if len(w) < 2 || w[0] != '-' {
			return nil, fmt.Errorf("nginx: invalid option %q", w)
		}
		for j := 1; j < len(w); j++ {
			opt := w[j]
			switch opt {
			case 't', 'T', 'v', 'V', 'h', '?':
				c.NoServer = "-" + string(opt)
				continue
			case 'q':
				continue
			case 'p', 'c', 'g', 's', 'e':
			default:
				return nil, fmt.Errorf("nginx: invalid option %q", "-"+string(opt))
			}
			val, at, attached := w[j+1:], i, true
			if val == "" {
				if i+1 >= len(argv) {
					return nil, fmt.Errorf("nginx: option -%c requires a value", opt)
				}
				i++
				val, at, attached = argv[i], i, false
			}
			c.set(opt, val, at, attached)
			break
		}
	}
	return c, nil
}

func (c *Command) set(opt byte, val string, at int, attached bool) {
	switch opt {
	case 'p':
		c.Prefix = val
	case 'c':
		c.Conf = val
	case 'g':
		c.Globals, c.globalsAt, c.globalsAttached = val, at, attached
	case 's':
		c.NoServer = "-s"
	}
}

// WithGlobals returns the argv with extra appended to the -g directives (nginx keeps only the
// last -g, so extra joins it rather than adding another).
func (c *Command) WithGlobals(extra string) []string {
	argv := append([]string(nil), c.Argv...)
	joined := strings.TrimSpace(strings.TrimSpace(c.Globals) + " " + extra)
	switch {
	case extra == "":
	case c.globalsAt < 0:
		argv = append(argv, "-g", joined)
	case c.globalsAttached:
		argv[c.globalsAt] = "-g" + joined
	default:
		argv[c.globalsAt] = joined
	}
	return argv
}

// Build is what nginx was compiled with: its default prefix, configuration file and pid file.
type Build struct {
	Prefix   string
	ConfPath string
	// PidPath is the compiled-in pid file (--pid-path), relative to the prefix unless absolute;
	// empty: nginx's own default.
	PidPath string
}

// nginx's own defaults when ./configure was given none of them.
var upstreamBuild = Build{Prefix: "/usr/local/nginx/", ConfPath: "conf/nginx.conf", PidPath: "logs/nginx.pid"}

var configureArg = regexp.MustCompile(`--(prefix|conf-path|pid-path)=(\S+)`)

// ParseVersion reads `nginx -V` output (configure arguments) into a Build.
func ParseVersion(out string) Build {
	b := upstreamBuild
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "configure arguments:") {
			continue
		}
		for _, m := range configureArg.FindAllStringSubmatch(line, -1) {
			switch m[1] {
			case "prefix":
				b.Prefix = m[2]
			case "conf-path":
				b.ConfPath = m[2]
			default:
				b.PidPath = m[2]
			}
		}
	}
	return b
}

// QueryBuild runs `nginx -V` (without the shim: env must not preload it) to learn the
// compiled-in prefix and configuration path.
func QueryBuild(ctx context.Context, binary string, env []string) (Build, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-V")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Build{}, fmt.Errorf("%s -V: %w: %s", binary, err, strings.TrimSpace(string(out)))
	}
	return ParseVersion(string(out)), nil
}

// prefixed resolves a path of the configuration or the build against the prefix (-p, else the
// compiled-in one), as nginx does.
func (c *Command) prefixed(b Build, path string) string {
	prefix := b.Prefix
	if c.Prefix != "" {
		prefix = c.Prefix
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(prefix, path)
}

// ConfFile is the configuration file the command will read: -c, else the compiled-in path,
// either relative to the prefix (-p, else the compiled-in prefix).
func (c *Command) ConfFile(b Build) string {
	prefix := b.Prefix
	if c.Prefix != "" {
		prefix = c.Prefix
	}
	conf := b.ConfPath
	if c.Conf != "" {
		conf = c.Conf
	}
	if filepath.IsAbs(conf) {
		return filepath.Clean(conf)
	}
	return filepath.Join(prefix, conf)
}
