package launcher

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// fakeNginx writes an executable named nginx (a shell script standing in for the binary: what
// is tested is what the launcher reads, passes and signals) and an nginx.conf; the launcher
// learns the conf path as from `nginx -V`.
func fakeNginx(t *testing.T, l *Launcher, dir, script, conf string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "nginx")
	write(t, dir, "nginx.conf", conf)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	l.NginxBuild = func(context.Context, string) (nginxconf.Build, error) {
		return nginxconf.Build{Prefix: dir, ConfPath: filepath.Join(dir, "nginx.conf")}, nil
	}
	l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: "2"}[k] }
	return bin
}

const goodConf = "events { use epoll; multi_accept on; }\nhttp { sendfile off; server { listen 80 reuseport; } }\n"

// A refused configuration stops the launcher before it waits for the dataplane (there is none
// here) and before nginx runs, with the file, line and what to write.
func TestRefusesNginxConfigurationThatBreaksTheShim(t *testing.T) {
	l, dir, log := newTest(t, 0, 1)
	ran := filepath.Join(dir, "ran")
	bin := fakeNginx(t, l, dir, "touch "+ran+"\n", "events {}\nhttp {\n  sendfile on;\n  server { listen 80; }\n}\n")
	if code := l.Run(context.Background(), []string{bin, "-g", "daemon off;"}); code != ExitConfig {
		t.Fatalf("exit code %d, want %d; log:\n%s", code, ExitConfig, log)
	}
	for _, want := range []string{
		filepath.Join(dir, "nginx.conf") + `:3: "sendfile on"`, `write "sendfile off;"`,
		`:4: "listen 80": no listen of *:80 has reuseport`,
	} {
		if !strings.Contains(readable(t, log.String()), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("nginx ran with a refused configuration")
	}
}

func TestFixesUpNginxFromTheCommandLine(t *testing.T) {
	l, dir, log := newTest(t, 3, 5)
	ready(t, dir, "1")
	args := filepath.Join(dir, "args")
	bin := fakeNginx(t, l, dir, `for a in "$@"; do echo "$a"; done >`+args+"\n", goodConf)
	if code := l.Run(context.Background(), []string{bin}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	got, _ := os.ReadFile(args)
	want := "-g\nworker_processes 2; worker_cpu_affinity 1000 100000; daemon off;\n"
	if string(got) != want {
		t.Fatalf("nginx got arguments %q, want %q", got, want)
	}
	if !strings.Contains(readable(t, log.String()), "nginx: set worker_cpu_affinity for 2 workers on the container's CPUs 3,5") {
		t.Errorf("the fix-up is not logged:\n%s", log)
	}
	// nginx -t passes through untouched, whatever the file says.
	if code := l.Run(context.Background(), []string{bin, "-t"}); code != 0 {
		t.Fatalf("nginx -t: exit code %d", code)
	}
	if got, _ := os.ReadFile(args); string(got) != "-t\n" {
		t.Fatalf("nginx -t got %q", got)
	}
}

func ready(t *testing.T, dir, gen string) {
	t.Helper()
	write(t, dir, podcontract.GenerationFile, gen+"\n")
	write(t, dir, podcontract.ReadyFile, gen+"\n")
}

// The stop sequence: SIGQUIT first; a master that ignores it gets SIGTERM; a worker left
// behind by its master (they do spin under the shim) gets SIGKILL with the whole group.
func TestStopsNginxGracefullyFirst(t *testing.T) {
	for _, c := range []struct {
		name, script, want string
		code               int
	}{
		// A background child of sh ignores SIGQUIT: the "master" stops its "worker" itself.
		{"graceful", "trap 'kill $!; exit 0' QUIT\nsleep 30 & wait\n", "nginx stopped .*signal=quit", 0},
		{"fast", "trap '' QUIT\ntrap 'kill $!; exit 3' TERM\nsleep 30 & wait\n", "nginx stopped .*signal=terminated", 3},
		{"spinning worker", "trap '' QUIT\ntrap 'exit 3' TERM\nsh -c \"trap '' QUIT TERM; while :; do sleep 0.05; done\" &\nwait\n", "nginx needed SIGKILL", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, dir, _ := newTest(t, 0)
			log := &syncbuf.Buffer{}
			l.Log = log
			l.QuitGrace, l.TermGrace = 300*time.Millisecond, 300*time.Millisecond
			ready(t, dir, "1")
			bin := fakeNginx(t, l, dir, c.script, goodConf)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for !strings.Contains(log.String(), podcontract.EnvShimInitialLcore+"=") {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(200 * time.Millisecond) // the script sets its traps
				cancel()
			}()
			if code := l.Run(ctx, []string{bin}); code != c.code {
				t.Errorf("exit code %d, want %d", code, c.code)
			}
			if !regexp.MustCompile(c.want).MatchString(readable(t, log.String())) {
				t.Errorf("log lacks %q:\n%s", c.want, log)
			}
		})
	}
}

// Under the lab's cpuPolicy Shared the app container runs on the CPUs the dataplane's lcores
// busy-poll on: the master (FF_INITIAL_LCORE_ID) and the workers (worker_cpu_affinity) take the
// CPUs the dataplane's placement leaves free, those the switch's PMD polls on last. Before the
// placement file, both took the container's first CPU, the lcore's (58 req/s on the lab's node).
func TestNginxKeepsOffTheLcoresCPUs(t *testing.T) {
	l, dir, log := newTest(t, 0, 1, 2, 3)
	ready(t, dir, "1")
	write(t, dir, podcontract.PlacementFile, `{"lcoreCPUs":[3],"switchCPUs":[0]}`)
	args, env := filepath.Join(dir, "args"), filepath.Join(dir, "env")
	bin := fakeNginx(t, l, dir, `for a in "$@"; do echo "$a"; done >`+args+"\necho \"$"+podcontract.EnvShimInitialLcore+"\" >"+env+"\n", goodConf)
	l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: "4"}[k] }
	if code := l.Run(context.Background(), []string{bin}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	got, _ := os.ReadFile(args)
	// Workers on 1, 2, then the switch's 0; never 3.
	if want := "-g\nworker_processes 4; worker_cpu_affinity 10 100 1 10; daemon off;\n"; string(got) != want {
		t.Fatalf("nginx got arguments %q, want %q", got, want)
	}
	if got, _ := os.ReadFile(env); strings.TrimSpace(string(got)) != "0x2" {
		t.Fatalf("%s = %q, want 0x2 (CPU 1, the first no lcore runs on)", podcontract.EnvShimInitialLcore, got)
	}
	if !strings.Contains(readable(t, log.String()), "no F-Stack lcore runs on (lcores on 3)") {
		t.Errorf("the log does not say why CPU 1:\n%s", log)
	}
}

// A container whose every CPU is an lcore's still starts, and says what it shares.
func TestAppOnTheLcoresOwnCPUSaysSo(t *testing.T) {
	l, dir, log := newTest(t, 1)
	ready(t, dir, "1")
	write(t, dir, podcontract.PlacementFile, `{"lcoreCPUs":[1]}`)
	out := filepath.Join(dir, "env")
	if code := l.Run(context.Background(), []string{"sh", "-c", `echo "$` + podcontract.EnvShimInitialLcore + `" > ` + out}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	if got, _ := os.ReadFile(out); strings.TrimSpace(string(got)) != "0x2" {
		t.Fatalf("%s = %q, want 0x2", podcontract.EnvShimInitialLcore, got)
	}
	if !strings.Contains(readable(t, log.String()), "are all F-Stack lcores' (1)") {
		t.Errorf("the log does not say the app shares the lcore's CPU:\n%s", log)
	}
}
