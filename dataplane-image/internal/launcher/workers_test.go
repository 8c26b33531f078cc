package launcher

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// tree is a fake process tree: the master's children at each look, in order.
type tree struct{ looks [][]int }

func (tr *tree) children(int) []int {
	if len(tr.looks) == 0 {
		return nil
	}
	kids := tr.looks[0]
	if len(tr.looks) > 1 {
		tr.looks = tr.looks[1:]
	}
	return kids
}

// looksEvery plays the looks 100 ms apart (on a fake clock) and returns the first verdict and
// the look that gave it (-1: none).
func looksEvery(w *workerWatch, n int) (string, int) {
	t0 := time.Unix(1000, 0)
	for i := 0; i < n; i++ {
		if why := w.observe(1, t0.Add(time.Duration(i)*100*time.Millisecond)); why != "" {
			return why, i
		}
	}
	return "", -1
}

func repeatLook(kids []int, n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = kids
	}
	return out
}

// The watch, look by look: workers that count are up for 1 s; fewer than 2 of them for 3 s
// means the app cannot serve.
func TestWorkerWatch(t *testing.T) {
	for _, c := range []struct {
		name  string
		looks [][]int
		// at is the look that finds the app broken (-1: never, in 100 looks = 10 s).
		at   int
		want string
	}{
		{name: "both workers stay", looks: repeatLook([]int{10, 11}, 100), at: -1},
		{name: "nginx slow to start its workers is not judged",
			looks: append(repeatLook(nil, 60), repeatLook([]int{10, 11}, 40)...), at: -1},
		// One worker SIGKILLed at look 20 and never replaced: short from look 20, broken 3 s later.
		{name: "a worker killed and not replaced",
			looks: append(repeatLook([]int{10, 11}, 20), repeatLook([]int{11}, 80)...), at: 50,
			want: "nginx has had 1 of its 2 workers up for 3s (workers seen to die meanwhile: 1): it cannot serve"},
		// Under the multi-SC shim: each respawned worker dies at once, a new pid at every look.
		{name: "a worker respawned and dying in a loop",
			looks: append(repeatLook([]int{10, 11}, 20), func() [][]int {
				var l [][]int
				for pid := 100; pid < 180; pid++ {
					l = append(l, []int{11, pid})
				}
				return l
			}()...), at: 50,
			want: "nginx has had 1 of its 2 workers up for 3s (workers seen to die meanwhile: 31)"},
		{name: "the master left without any worker",
			looks: append(repeatLook([]int{10, 11}, 20), repeatLook(nil, 80)...), at: 50,
			want: "nginx has had 0 of its 2 workers up for 3s (workers seen to die meanwhile: 2)"},
		// A reload (SIGHUP to the master): new workers start beside the old ones, which leave.
		// Under the shim the new ones cannot serve, so the first look that sees them says so.
		{name: "a reload starts new workers beside the old",
			looks: append(append(repeatLook([]int{10, 11}, 20), repeatLook([]int{10, 11, 20, 21}, 5)...), repeatLook([]int{20, 21}, 75)...), at: 20,
			want: "nginx's master started 2 new workers beside its 2 running ones: it was asked to reload"},
		{name: "a reload seen only once the old workers left",
			looks: append(repeatLook([]int{10, 11}, 20), repeatLook([]int{20, 21}, 80)...), at: 20,
			want: "nginx's master replaced all its 2 workers"},
		{name: "a worker killed and replaced within the settle time",
			looks: append(append(repeatLook([]int{10, 11}, 20), repeatLook([]int{11}, 10)...), repeatLook([]int{11, 12}, 70)...), at: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := &tree{looks: c.looks}
			w := newWorkerWatch("nginx", 2, time.Second, 3*time.Second, tr.children)
			why, at := looksEvery(w, 100)
			if at != c.at || !strings.Contains(why, c.want) {
				t.Fatalf("verdict at look %d: %q; want look %d with %q", at, why, c.at, c.want)
			}
		})
	}
}

// A master past its start whose workers the watch never saw (its only worker and every
// respawn died between two looks) is judged like one that lost them; before masterUp the
// watch waits for a first worker, as for a slow start.
func TestWorkerWatchMasterUpWithNoWorkerSeen(t *testing.T) {
	w := newWorkerWatch("nginx", 1, time.Second, 3*time.Second, (&tree{}).children)
	if why, at := looksEvery(w, 50); at != -1 {
		t.Fatalf("a master not known to be up was judged at look %d: %q", at, why)
	}
	w.masterUp()
	why, at := looksEvery(w, 50)
	if at != 30 || !strings.Contains(why, "nginx has had 0 of its 1 workers up for 3s (workers seen to die meanwhile: 0): it cannot serve") {
		t.Fatalf("verdict at look %d: %q; want look 30, 0 of 1 workers up for 3s", at, why)
	}
}

// childrenOf reads the real process tree: a shell's two sleeping children, not its exited one.
func TestChildrenOfRealProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 30 & a=$!; sleep 30 & b=$!; true & wait $!; echo $a $b > "+filepath.Join(dir, "kids")+"; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var want []string
	for deadline := time.Now().Add(10 * time.Second); len(want) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shell did not start its children")
		}
		b, _ := os.ReadFile(filepath.Join(dir, "kids"))
		want = strings.Fields(string(b))
	}
	var got []string
	for _, pid := range childrenOf(cmd.Process.Pid) {
		got = append(got, strconv.Itoa(pid))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("childrenOf = %v, want the two sleeps %v", got, want)
	}
}

// An Nginx stand-in (a shell script: the master and its two workers) loses a worker to SIGKILL
// and, as under the multi-SC shim, every worker it respawns dies with SIGSEGV at once: the
// launcher marks the app broken for its probes, stops it gracefully first, and exits
// ExitAppBroken so the kubelet restarts the container. On main the launcher waited on the
// master for good.
func TestStopsAnNginxThatLostItsWorkers(t *testing.T) {
	l, dir, _ := newTest(t, 0, 1)
	log := &syncbuf.Buffer{}
	l.Log, l.MinWorkerAge, l.WorkerSettle = log, 300*time.Millisecond, 600*time.Millisecond
	l.QuitGrace, l.TermGrace = 2*time.Second, time.Second
	ready(t, dir, "2")
	// A marker left by the container's previous run goes when the app starts.
	if err := podcontract.WriteAppBroken(l.StateDir, "the previous run's"); err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(dir, "worker")
	bin := fakeNginx(t, l, dir, `trap 'kill $w1 $w2 2>/dev/null; exit 0' QUIT
sleep 1000 & w1=$!
sleep 1000 & w2=$!
echo $w1 >`+worker+`
wait $w1
{ for i in 1 2 3 4 5; do sh -c 'kill -SEGV $$'; done; } 2>/dev/null
wait
`, goodConf)
	go func() {
		for {
			if b, err := os.ReadFile(worker); err == nil && len(b) > 0 {
				if _, broken, _ := podcontract.ReadAppBroken(filepath.Dir(l.StateDir), "nginx"); broken {
					t.Error("the previous run's marker was still there once the app ran")
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				time.Sleep(time.Second)                // the launcher sees both workers up first
				_ = syscall.Kill(pid, syscall.SIGKILL) // as the OOM killer does
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// A bound for the run without the watch, which waits on the master for good.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := l.Run(ctx, []string{bin})
	if code != ExitAppBroken {
		t.Fatalf("exit code %d, want %d; log:\n%s", code, ExitAppBroken, log)
	}
	for _, want := range []string{"watching nginx's workers.* workers=2", "nginx has had 1 of its 2 workers up for", "it cannot serve; stopping it, then starting it again", "nginx stopped .*signal=quit"} {
		if !regexp.MustCompile(want).MatchString(readable(t, log.String())) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	why, broken, err := podcontract.ReadAppBroken(filepath.Dir(l.StateDir), "nginx")
	if err != nil || !broken || !strings.Contains(why, "1 of its 2 workers") {
		t.Fatalf("app-broken marker: %q %v %v, want the reason", why, broken, err)
	}
}

// An Nginx stand-in writes its pid file, as Nginx does just before it forks its workers, and
// its one worker dies before the launcher's first look (the e2e suite killed one 50 ms after
// its fork; the multi-SC shim's respawns died within the same millisecond): the children the
// launcher sees are none, as then. It stops the app as broken once the master is up without
// workers for the settle time. On main its watch never started: the app stayed unready for
// good while its liveness probe, answered by F-Stack on the master's sockets, passed.
func TestStopsAnNginxWhoseWorkerDiedBeforeAnyLook(t *testing.T) {
	l, dir, _ := newTest(t, 0, 1)
	log := &syncbuf.Buffer{}
	l.Log, l.MinWorkerAge, l.WorkerSettle = log, 300*time.Millisecond, 600*time.Millisecond
	l.QuitGrace, l.TermGrace = 2*time.Second, time.Second
	l.Children = func(int) []int { return nil }
	ready(t, dir, "2")
	pidPath := filepath.Join(dir, "nginx.pid")
	// Deaf to SIGTERM as a shim Nginx is: one that died of it raced the check that follows it
	// (DeadGrace 0 here) and, under load, was taken for one that stopped on it.
	bin := fakeNginx(t, l, dir, `echo $$ > `+pidPath+`
trap 'rm -f `+pidPath+`; exit 0' QUIT
trap '' TERM
while :; do sleep 0.05; done
`, "pid "+pidPath+";\n"+goodConf)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if code := l.Run(ctx, []string{bin}); code != ExitAppBroken {
		t.Fatalf("exit code %d, want %d (the app judged broken); log:\n%s", code, ExitAppBroken, log)
	}
	if want := "nginx has had 0 of its 2 workers up for"; !strings.Contains(readable(t, log.String()), want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	// No worker is up, so there is no request to finish: no SIGQUIT and its grace (the stand-in
	// master leaves on SIGQUIT only, as a shim Nginx leaves on neither), SIGKILL after DeadGrace.
	if want := "nginx with no worker up killed"; !strings.Contains(readable(t, log.String()), want) {
		t.Errorf("log lacks %q (it was stopped gracefully first):\n%s", want, log)
	}
}

// The stops and the watch are as short as real F-Stack showed they can be: a killed primary or
// Nginx worker must serve again within 5 s, and every second of these was waited out in full on
// each fault (docs/benchmarks.md "Faults").
func TestDefaultsServeAgainWithinFiveSeconds(t *testing.T) {
	l := New()
	if l.MovedGrace > 500*time.Millisecond || l.DeadGrace > 500*time.Millisecond {
		t.Errorf("MovedGrace %s, DeadGrace %s: a shim app of a dead primary, or an Nginx with no worker, never exits on its own", l.MovedGrace, l.DeadGrace)
	}
	if l.WorkerSettle > 2*time.Second || l.WorkerSettle < l.MinWorkerAge+time.Second {
		t.Errorf("WorkerSettle %s: want MinWorkerAge (%s) and a second more for a respawned worker, and no more", l.WorkerSettle, l.MinWorkerAge)
	}
}

// Only an app whose workers the launcher configured is watched.
func TestWatchesOnlyNginx(t *testing.T) {
	l, dir, log := newTest(t, 1)
	l.MinWorkerAge, l.WorkerSettle = 100*time.Millisecond, 200*time.Millisecond
	ready(t, dir, "2")
	if code := l.Run(context.Background(), []string{"sh", "-c", "sleep 0.1 & wait; sleep 1"}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	if strings.Contains(readable(t, log.String()), "watching") {
		t.Fatalf("a plain command was watched for workers:\n%s", log)
	}
}
