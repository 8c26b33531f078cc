package nginxconf

import (
	"strings"
	"testing"
)

func checkFStack(t *testing.T, src string) *Plan {
	t.Helper()
	main, err := ParseString("/etc/nginx/nginx.conf", src)
	if err != nil {
		t.Fatal(err)
	}
	return CheckFStack(main, FStack{Processes: 2, Config: "/etc/f-stack/config.ini", ConfDir: "/etc/nginx", CPUs: []int{3, 5}})
}

// What the stack decides is added when the file is silent, with -g (nginx refuses a directive
// both in -g and in the file, so only the missing ones are added).
func TestCheckFStackAddsWhatTheStackDecides(t *testing.T) {
	p := checkFStack(t, "events {}\nhttp { server { listen 80; } }\n")
	if len(p.Refusals) > 0 {
		t.Fatalf("refused: %v", p.Refusals)
	}
	want := []string{"worker_processes 2;", "fstack_conf /etc/f-stack/config.ini;", "daemon off;", "user root;"}
	if strings.Join(p.Globals, " ") != strings.Join(want, " ") {
		t.Fatalf("globals %q, want %q", p.Globals, want)
	}
	p = checkFStack(t, "user root;\nworker_processes 2;\nfstack_conf ../f-stack/config.ini;\ndaemon off;\nworker_cpu_affinity 1000 000100000;\n")
	if len(p.Refusals) > 0 || len(p.Globals) > 0 {
		t.Fatalf("a file that agrees needs nothing: refusals %v, globals %v", p.Refusals, p.Globals)
	}
}

// With lcores sharing CPUs (lab option) every worker needs the supervisor's KUBE_FSTACK_LCORE_CPUS,
// which nginx would clear before ff_mod_init without an env directive.
func TestCheckFStackKeepsTheLcoreEnvironment(t *testing.T) {
	main, err := ParseString("/etc/nginx/nginx.conf", "events {}\n")
	if err != nil {
		t.Fatal(err)
	}
	p := CheckFStack(main, FStack{Processes: 2, Config: "/c.ini", ConfDir: "/etc/nginx", CPUs: []int{1, 1}, Env: []string{"KUBE_FSTACK_LCORE_CPUS"}})
	if len(p.Refusals) > 0 || !strings.Contains(strings.Join(p.Globals, " "), "env KUBE_FSTACK_LCORE_CPUS;") {
		t.Fatalf("globals %q, refusals %v: want env KUBE_FSTACK_LCORE_CPUS;", p.Globals, p.Refusals)
	}
}

func TestCheckFStackRefusesWhatCannotWork(t *testing.T) {
	for src, want := range map[string]string{
		"worker_processes 4;":            `nginx.conf:1: "worker_processes 4": F-Stack's Nginx runs worker i as F-Stack process i, and the StackInstance has 2`,
		"worker_processes auto;":         `"worker_processes auto"`,
		"fstack_conf /etc/f-stack.conf;": `"fstack_conf /etc/f-stack.conf": the supervisor renders config.ini at /etc/f-stack/config.ini`,
		"worker_cpu_affinity auto;":      `ff_init pins worker i to the i-th CPU of the container's cpuset (3,5)`,
		"worker_cpu_affinity 01 10;":     `write "worker_cpu_affinity 1000 100000;"`,
		"daemon on;":                     `"daemon on": a daemonised master`,
		"master_process off;":            `"master_process off": without a master`,
		"http { server { listen 80 reuseport default_server; } }": `nginx.conf:1: "listen 80 reuseport default_server": with 2 F-Stack processes each worker`,
		"stream { server { listen 443 quic reuseport; } }":        `"listen 443 quic reuseport": with 2 F-Stack processes`,
	} {
		p := checkFStack(t, src)
		if len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0], want) {
			t.Errorf("%s: refusals %q, want one containing %q", src, p.Refusals, want)
		}
	}
}

// One process has one clone of each address, which it polls: reuseport is harmless there.
func TestCheckFStackTakesReuseportWithOneProcess(t *testing.T) {
	main, err := ParseString("/etc/nginx/nginx.conf", "http { server { listen 80 reuseport; listen 443 quic reuseport; } }\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := CheckFStack(main, FStack{Processes: 1, Config: "/c.ini", ConfDir: "/etc/nginx", CPUs: []int{1}}); len(p.Refusals) > 0 {
		t.Fatalf("one process: refused %v", p.Refusals)
	}
}
