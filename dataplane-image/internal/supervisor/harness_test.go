package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// harness is a fake pod tree: spec, device info, volumes, and fake fact sources.
type harness struct {
	t      *testing.T
	paths  facts.Paths
	cpus   []int
	env    map[string]string
	fsType int64
	bsize  int64
	log    *syncbuf.Buffer
	// logging is the supervisor's log format and level (text, info when zero).
	logging logging.Options
}

func newHarness(t *testing.T, spec *fsv1.StackInstanceSpec) *harness {
	t.Helper()
	root := t.TempDir()
	h := &harness{t: t, cpus: []int{2, 3}, env: map[string]string{}, fsType: unix.HUGETLBFS_MAGIC, bsize: 2 << 20, log: &syncbuf.Buffer{}}
	h.paths = facts.Paths{
		SpecFile: filepath.Join(root, "podinfo", "spec"), PodInfoDir: filepath.Join(root, "podinfo"),
		PodSocketDir: filepath.Join(root, "vhost"), HugePagesDir: filepath.Join(root, "huge"),
		RuntimeDir: filepath.Join(root, "run", "dpdk"), ShimDir: filepath.Join(root, "shim"), AppStateDir: filepath.Join(root, "app"),
		ImageShimDir: filepath.Join(root, "image-shim"), ConfigFile: filepath.Join(root, "etc", "config.ini"),
	}
	// The kubelet makes each app container's directory of the app-state volume (its subPath).
	for _, d := range []string{h.paths.PodInfoDir, h.paths.PodSocketDir, h.paths.HugePagesDir, h.paths.RuntimeDir, h.paths.ImageShimDir, filepath.Join(h.paths.AppStateDir, "nginx")} {
		mustDo(t, os.MkdirAll(d, 0o755))
	}
	data, err := json.Marshal(spec)
	mustDo(t, err)
	mustDo(t, os.WriteFile(h.paths.SpecFile, data, 0o644))
	return h
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) writeDevinfo() {
	const ifname = "net1"
	mustDo(h.t, podcontract.WriteDevInfo(filepath.Join(h.paths.PodSocketDir, ifname+".json"), &podcontract.DevInfo{
		Type: podcontract.DevInfoTypeVhostUser, Version: podcontract.DevInfoVersion,
		VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: "/var/run/kube-fstack/vhost/" + ifname + ".sock"},
		MAC:       "02:00:00:00:00:01", IPs: []string{"10.1.0.5/24"}, Gateway: "10.1.0.1",
	}))
}

func (h *harness) facts() *facts.FactSource {
	return &facts.FactSource{
		Paths:    h.paths,
		Affinity: func() ([]int, error) { return h.cpus, nil },
		LookupEnv: func(k string) (string, bool) {
			v, ok := h.env[k]
			return v, ok
		},
		Statfs: func(_ string, st *unix.Statfs_t) error {
			st.Type, st.Bsize = h.fsType, h.bsize
			return nil
		},
	}
}

// supervisor runs the fake processes with the given modes for the primary and the secondaries.
func (h *harness) supervisor(primary, secondary string) *Supervisor {
	cfg := Config{
		Paths: h.paths,
		// Through the seam the stand-in image uses (its program mode), with this test binary
		// as the program.
		Launch: Launch{Programs: &program.Program{Program: os.Args[0],
			PrimaryArgs: []string{primary}, SecondaryArgs: []string{secondary}}},
		Timing:      Timing{StartTimeout: 5 * time.Second, Grace: time.Second, Poll: 10 * time.Millisecond},
		Logging:     h.logging,
		StatusToken: testToken,
	}
	s := New(cfg, h.facts(), h.log)
	s.telemetryPeer = fakeTelemetryPeer
	// GORACE: under -race the fake would otherwise linger a second at exit, past the grace.
	s.Env = append(os.Environ(), fakeEnv+"=1", fakeHugeEnv+"="+h.paths.HugePagesDir, "GORACE=atexit_sleep_ms=0")
	return s
}

// fakeTelemetryPeer accepts the primary's process tree, as the supervisor does, and this test
// process, where the unit tier's fake telemetry servers run (the fake primary is a re-executed
// test binary that serves none).
func fakeTelemetryPeer(primary int) telemetry.Peer {
	real := telemetry.ProcessOf(primary)
	return func(cred *unix.Ucred) error {
		if int(cred.Pid) == os.Getpid() {
			return nil
		}
		return real(cred)
	}
}

// run starts Run in the background; the result arrives on the channel.
func run(s *Supervisor, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Run(ctx) }()
	return ch
}

func (h *harness) shimFile(name string) string {
	b, err := os.ReadFile(filepath.Join(h.paths.ShimDir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func waitResult(t *testing.T, ch <-chan error) error {
	t.Helper()
	const within = 10 * time.Second
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// vhostSpec is a spec with one vhost-user port on attachment net1, addressed by its IPAM, and
// no shim.
func vhostSpec(processes int32) *fsv1.StackInstanceSpec {
	return &fixtures.StackInstance("vhost", fixtures.WithProcesses(processes),
		fixtures.WithVhostPort("data", "net1", processes), fixtures.WithShim(false)).Spec
}

// logLines parses the supervisor's log as the default format (text, key=value): every line
// must parse and carry component=fstack-supervisor.
func (h *harness) logLines() []logtest.Line {
	h.t.Helper()
	if h.log.String() == "" {
		return nil
	}
	lines, err := logtest.Parse(h.log.String(), logging.FormatText, logging.ComponentSupervisor)
	if err != nil {
		h.t.Fatalf("the supervisor's log: %v", err)
	}
	return lines
}

// logIndex is the index of the first line of the log whose msg contains msg and whose keys
// have the values of kv (key, value pairs; "" matches any value), or -1.
func (h *harness) logIndex(msg string, kv ...any) int {
	h.t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		want[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
	}
	lines := h.logLines()
	for i := range lines {
		if _, ok := logtest.Find(lines[i:i+1], msg, want); ok {
			return i
		}
	}
	return -1
}

// logged says whether the log has such a line (logIndex).
func (h *harness) logged(msg string, kv ...any) bool { return h.logIndex(msg, kv...) >= 0 }

// logLine is the first such line, or nil.
func (h *harness) logLine(msg string, kv ...any) logtest.Line {
	if i := h.logIndex(msg, kv...); i >= 0 {
		return h.logLines()[i]
	}
	return nil
}
