package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
)

// fakeNginxMaster plays F-Stack's Nginx master as the supervisor observes it: it reads -c and
// -g as nginx does, refuses to start without fstack_conf ("fstack_conf null", exit 2), forks
// worker 0 as the fake primary, waits for its EAL init (nginx waits for ff_init on a
// semaphore), then forks the other workers as fake secondaries, and stops them on SIGTERM.
func fakeNginxMaster(args []string) int {
	fmt.Printf("fake nginx argv: %q\n", args)
	cmd, err := nginxconf.ParseCommand(append([]string{"nginx"}, args...))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	globals, _ := nginxconf.ParseString("-g", cmd.Globals)
	file, err := nginxconf.ReadFile(cmd.Conf, nginxconf.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	workers, conf := 1, ""
	for _, d := range append(globals, file...) {
		switch d.Name {
		case "worker_processes":
			_, _ = fmt.Sscan(d.Args[0], &workers)
		case "fstack_conf":
			conf = d.Args[0]
		}
	}
	if _, err := os.Stat(conf); err != nil {
		fmt.Println("fstack_conf null")
		return 2
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return e == fakeNginxEnv+"=1" })
	var kids []*exec.Cmd
	rd := filepath.Join(os.Getenv("RUNTIME_DIRECTORY"), "dpdk")
	for i := range workers {
		mode := "secondary"
		if i == 0 {
			mode = "primary"
		}
		c := exec.Command(os.Args[0], "--", mode)
		c.Env, c.Stdout, c.Stderr = env, os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			return 1
		}
		go func() { _ = c.Wait() }() // reaped at once, as nginx's SIGCHLD handler does
		kids = append(kids, c)
		for i == 0 && readiness.PrimaryState(rd, DefaultPrefix) != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	<-term
	for _, c := range kids {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	time.Sleep(100 * time.Millisecond)
	return 0
}
