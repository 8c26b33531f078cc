package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
)

// Nginx is what the stand-in of F-Stack's Nginx takes from its command line and configuration,
// as F-Stack's Nginx does: the number of workers (each an F-Stack process) and fstack_conf.
type Nginx struct {
	Workers int
	Conf    string
	Daemon  bool
	// Env names the variables of the master's environment the workers keep (env directives):
	// nginx replaces a worker's environment by them (and TZ) before F-Stack's ff_mod_init.
	Env []string
}

// WorkerEnv looks a variable up as a worker sees it: only what an env directive kept.
func (n *Nginx) WorkerEnv(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range n.Env {
			if e == name {
				return lookup(name)
			}
		}
		return "", false
	}
}

// ReadNginx reads `nginx [-c file] [-g directives]` (argv[0] is nginx) the way nginx does: -g
// first, then the file; a directive in both is nginx's "is duplicate" error, and no
// fstack_conf is F-Stack's "fstack_conf null".
func ReadNginx(argv []string) (*Nginx, error) {
	cmd, err := nginxconf.ParseCommand(argv)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cmd.Conf) {
		return nil, fmt.Errorf("the stand-in reads only an absolute -c (it has no compiled-in prefix)")
	}
	globals, err := nginxconf.ParseString("nginx -g", cmd.Globals)
	if err != nil {
		return nil, err
	}
	file, err := nginxconf.ReadFile(cmd.Conf, nginxconf.DefaultLimits)
	if err != nil {
		return nil, err
	}
	n := &Nginx{Workers: 1, Daemon: true}
	seen := map[string]bool{}
	for _, d := range append(globals, file...) {
		if seen[d.Name] && (d.Name == "worker_processes" || d.Name == "fstack_conf" || d.Name == "daemon") {
			return nil, fmt.Errorf("%s: %q directive is duplicate", d.Where(), d.Name)
		}
		seen[d.Name] = true
		switch d.Name {
		case "worker_processes":
			if n.Workers, err = strconv.Atoi(strings.Join(d.Args, " ")); err != nil || n.Workers < 1 {
				return nil, fmt.Errorf("%s: invalid value %q", d.Where(), strings.Join(d.Args, " "))
			}
		case "fstack_conf":
			if len(d.Args) == 1 {
				n.Conf = d.Args[0]
				if !filepath.IsAbs(n.Conf) {
					n.Conf = filepath.Join(filepath.Dir(cmd.Conf), n.Conf)
				}
			}
		case "daemon":
			n.Daemon = len(d.Args) != 1 || d.Args[0] != "off"
		case "env":
			// "env NAME=value" sets a value; the stand-in only keeps inherited ones.
			if len(d.Args) == 1 && !strings.Contains(d.Args[0], "=") {
				n.Env = append(n.Env, d.Args[0])
			}
		}
	}
	if n.Conf == "" {
		return nil, errors.New("fstack_conf null")
	}
	return n, nil
}

// WaitPrimary waits, as F-Stack's Nginx master waits (15 s) for worker 0's ff_init, until the
// primary testpmd of the runtime directory has started its ports and made its mbuf pool, the
// point where a secondary may attach.
func WaitPrimary(runtimeDir string, timeout time.Duration, alive func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		err := primaryUp(runtimeDir)
		if err == nil {
			return nil
		}
		if !alive() || time.Now().After(deadline) {
			return fmt.Errorf("primary worker process failed to initialize: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func primaryUp(runtimeDir string) error {
	// Worker 0, the primary, is this master's child; any other process that bound the socket in
	// the shared runtime directory is not asked.
	c, err := telemetry.Dial(telemetry.SocketPath(runtimeDir, "rte"), time.Second, telemetry.ProcessOf(os.Getpid()))
	if err != nil {
		return err
	}
	defer c.Close()
	started, err := c.EthdevStarted(0)
	if err != nil {
		return err
	}
	if !started {
		return errors.New("port 0 not started yet")
	}
	pools, err := c.Command("/mempool/list")
	if err != nil {
		return err
	}
	if !strings.Contains(string(pools), "mb_pool_0") {
		return errors.New("no mb_pool_0 yet")
	}
	return nil
}

// RuntimeDir is DPDK's runtime directory for this environment (RUNTIME_DIRECTORY/dpdk).
func RuntimeDir() string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		return filepath.Join(d, "dpdk")
	}
	return "/var/run/dpdk"
}
