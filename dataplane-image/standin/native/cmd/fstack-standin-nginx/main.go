// fstack-standin-nginx stands in, in the stand-in image, for F-Stack's Nginx (app/nginx-* in
// F-Stack's tree) as the master process a StackInstance's spec.program mode Nginx starts:
// `nginx -c <nginx.conf> [-g ...]`. Like it, it takes worker_processes and fstack_conf from -g
// and the file, forks worker 0 as the F-Stack primary, waits (15 s) until it has finished its
// init, then forks the other workers as secondaries, each running DPDK's testpmd with the EAL
// arguments F-Stack would build for that process from fstack_conf (package native); it forks a
// worker that dies again, as nginx's master does, and stops its workers on SIGTERM, SIGQUIT or
// SIGINT. It serves no HTTP.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/native"
)

const testpmd = "/usr/bin/dpdk-testpmd"

type master struct {
	conf     *native.Nginx
	stopping atomic.Bool
	exited   chan int // a worker's index
	workers  []*exec.Cmd
	done     []chan struct{}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-V" {
		fmt.Println("nginx version: kube-fstack stand-in of F-Stack's Nginx (not F-Stack)")
		return
	}
	conf, err := native.ReadNginx(os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nginx: [emerg]", err)
		os.Exit(1)
	}
	if conf.Daemon {
		fmt.Fprintln(os.Stderr, "nginx: [emerg] the stand-in does not daemonise: write \"daemon off;\"")
		os.Exit(1)
	}
	m := &master{conf: conf, exited: make(chan int, conf.Workers), workers: make([]*exec.Cmd, conf.Workers), done: make([]chan struct{}, conf.Workers)}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGINT)
	fmt.Printf("stand-in F-Stack's Nginx (not F-Stack): %d workers, fstack_conf %s\n", conf.Workers, conf.Conf)
	for i := range conf.Workers {
		if err := m.spawn(i); err != nil {
			fmt.Fprintln(os.Stderr, "nginx: [alert]", err)
			m.stop()
			os.Exit(2)
		}
		if i == 0 {
			if err := native.WaitPrimary(native.RuntimeDir(), 15*time.Second, func() bool { return len(m.exited) == 0 }); err != nil {
				fmt.Fprintln(os.Stderr, "nginx: [emerg]", err)
				m.stop()
				os.Exit(2)
			}
		}
	}
	for {
		select {
		case <-sigs:
			m.stop()
			return
		case i := <-m.exited:
			fmt.Printf("nginx: [alert] worker process %d exited; forking it again\n", i)
			if err := m.spawn(i); err != nil {
				fmt.Fprintln(os.Stderr, "nginx: [alert]", err)
			}
		}
	}
}

// spawn forks worker i: F-Stack's Nginx calls ff_mod_init(fstack_conf, i, i == 0) in it.
func (m *master) spawn(i int) error {
	a := &native.Args{Conf: m.conf.Conf, ProcID: i, Primary: i == 0}
	argv, err := native.Testpmd(testpmd, a.WithLcoreCPUs(m.conf.WorkerEnv(os.LookupEnv)))
	if err != nil {
		return err
	}
	fmt.Printf("worker %d: %s\n", i, strings.Join(argv, " "))
	c := exec.Command(argv[0], argv[1:]...)
	// testpmd exits at EOF on its stdin: the master's, which the supervisor holds open.
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	m.workers[i], m.done[i] = c, done
	go func() {
		_ = c.Wait()
		close(done)
		if !m.stopping.Load() {
			m.exited <- i
		}
	}()
	return nil
}

// stop ends the workers, secondaries first, as the supervisor stops F-Stack's processes.
func (m *master) stop() {
	m.stopping.Store(true)
	for i := len(m.workers) - 1; i >= 0; i-- {
		if c := m.workers[i]; c != nil && c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(3 * time.Second)
	for _, done := range m.done {
		if done == nil {
			continue
		}
		select {
		case <-done:
		case <-deadline:
			return
		}
	}
}
