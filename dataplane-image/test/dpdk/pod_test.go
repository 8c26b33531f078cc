package dpdk

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// In-pod paths. The pod's /run is a private tmpfs in each container namespace, so nothing of
// the host's /run is touched; the shared volumes are host directories bind-mounted at the same
// path in every container, as kubelet does with emptyDirs.
const (
	podHugeDir   = "/run/kube-fstack/hugepages"
	podConfigDir = "/run/f-stack"
	podConfig    = podConfigDir + "/config.ini"
	podSocketDir = podcontract.PodSocketDir // /var/run -> /run
)

// readOnlyRootEnv, set for containerScript, makes every mount of the container read-only but the
// pod's volumes, /proc, /sys, /dev and a tmpfs at podConfigDir (the injected dataplane's scratch
// volume holding config.ini), as readOnlyRootFilesystem does.
const readOnlyRootEnv = "KFS_READONLY_ROOT"

// containerScript sets up a container's mounts: $1 socket dir, $2 shim dir, $3 DPDK runtime
// dir, $4 hugetlbfs; every other hugetlbfs mount of the machine is hidden, as in a pod, because
// DPDK would otherwise pick whichever it finds first. $5 are the CPUs, $6 the app-state dir
// (the whole volume for the dataplane, its own sub-directory for an app container, as the
// injector's subPath mount), $7 "ro" mounts the shim dir read-only (app containers, as
// injected); the rest is the command. dataplaneArgs and appArgs give $1-$7.
const containerScript = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/kube-fstack/vhost /run/kube-fstack/shim /run/kube-fstack/app /run/dpdk ` + podHugeDir + `
mount --bind "$1" /run/kube-fstack/vhost
mount --bind "$2" /run/kube-fstack/shim
if [ "$7" = ro ]; then mount -o remount,bind,ro /run/kube-fstack/shim; fi
mount --bind "$6" /run/kube-fstack/app
mount --bind "$3" /run/dpdk
mount --bind "$4" ` + podHugeDir + `
for m in $(awk '$3=="hugetlbfs"{print $2}' /proc/mounts); do [ "$m" = ` + podHugeDir + ` ] || umount -l "$m"; done
if [ -n "${` + readOnlyRootEnv + `:-}" ]; then
  mkdir -p ` + podConfigDir + ` && mount -t tmpfs tmpfs ` + podConfigDir + `
  mount -o remount,bind,ro /
  for m in $(awk '{print $2}' /proc/self/mounts); do
    case "$m" in /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run/kube-fstack/*|/run/dpdk|` + podConfigDir + `) ;;
    *) mount -o remount,bind,ro "$m" 2>/dev/null || true ;;
    esac
  done
  if touch /kfs-rw-probe /tmp/kfs-rw-probe /run/kfs-rw-probe 2>/dev/null; then echo "the root filesystem is still writable" >&2; exit 1; fi
  unset ` + readOnlyRootEnv + `
fi
cpus=$5; shift 7
if [ -n "$cpus" ]; then exec taskset -c "$cpus" "$@"; fi
exec "$@"`

// dataplaneArgs are containerScript's volume arguments for the dataplane container.
func (p *pod) dataplaneArgs(cpus string) []string {
	return []string{p.socketDir, p.shimDir, p.runDir, env.huge.Dir, cpus, p.stateDir, "rw"}
}

// appArgs are containerScript's volume arguments for the app container named container: no
// socket dir, the shim dir read-only, and its own directory of the app-state volume, which the
// kubelet makes for the subPath mount (a failure to make it shows as the script's failed mount).
func (p *pod) appArgs(container, cpus string) []string {
	own := filepath.Join(p.stateDir, container)
	_ = os.MkdirAll(own, 0o755)
	return []string{filepath.Join(p.dir, "empty"), p.shimDir, p.runDir, env.huge.Dir, cpus, own, "ro"}
}

// pod is one pod's shared volumes on the host and its OVS port.
type pod struct {
	name                                               string
	dir, socketDir, shimDir, runDir, imgShim, stateDir string
	specFile                                           string
	ip                                                 string
	// pidNS, when set, is a process in the pod's PID namespace (shareProcessNamespace: the pause
	// container's): the dataplane and apps join it instead of getting one each.
	pidNS int
}

func newPod(t testing.TB, name, ip string, processes int) *pod {
	t.Helper()
	dir := t.TempDir()
	p := &pod{name: name, dir: dir, ip: ip, specFile: filepath.Join(dir, "spec.json")}
	p.socketDir, p.shimDir, p.runDir, p.imgShim = filepath.Join(dir, "vhost"), filepath.Join(dir, "shim"), filepath.Join(dir, "dpdk"), filepath.Join(dir, "image-shim")
	p.stateDir = filepath.Join(dir, "app-state")
	for _, d := range []string{p.socketDir, p.shimDir, p.runDir, p.stateDir, filepath.Join(p.imgShim, "kernel-event+multi-sc"), filepath.Join(dir, "empty")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	p.writeImageShim(t)
	p.writeSpec(t, processes)
	p.writeDevinfo(t)
	p.addOVSPort(t)
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeImageShim stands in for what the image carries: the launcher (an executable) and the
// library of the default shim mode, which land in the shim volume with their mode bits.
func (p *pod) writeImageShim(t testing.TB) {
	must(t, os.WriteFile(filepath.Join(p.imgShim, podcontract.Launcher), []byte("#!/bin/sh\n"), 0o755))
	// A library that loads and does nothing: the launcher proves the shim loads with the app
	// before it starts it, so a file that is no library would stop every app of the tier.
	src := filepath.Join(p.dir, "noop-shim.c")
	must(t, os.WriteFile(src, []byte("int kube_fstack_noop_shim;\n"), 0o644))
	lib := filepath.Join(p.imgShim, "kernel-event+multi-sc", podcontract.ShimLibrary)
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc (hack/install-deps.sh installs it): %v\n%s", err, out)
	}
}

// writeSpec is the spec snapshot the injector would expose: one vhost-user port whose address
// comes from the attachment (the CNI plugin's IPAM).
func (p *pod) writeSpec(t testing.TB, processes int) {
	spec := fsv1.StackInstanceSpec{
		Processes: int32(processes),
		Ports: []fsv1.PortSpec{{
			Name: "data", Attachment: "net1",
			Device:     fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{Queues: int32(processes)}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressAttachment}},
		}},
	}
	data, err := json.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(p.specFile, data, 0o644))
}

func (p *pod) writeDevinfo(t testing.TB) {
	info := &podcontract.DevInfo{
		Type: podcontract.DevInfoTypeVhostUser, Version: podcontract.DevInfoVersion,
		VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: podSocketDir + "/net1.sock"},
		MAC:       "02:fe:00:00:07:01", IPs: []string{p.ip + "/24"}, Gateway: "10.99.7.1",
		Attachment: &podcontract.DevInfoAttachment{Network: "fstack", ContainerID: "c-" + p.name, IfName: "net1", PodUID: p.name},
	}
	must(t, podcontract.WriteDevInfo(filepath.Join(p.socketDir, "net1.json"), info))
}

// addOVSPort is what fstack-cni does for the attachment: OVS is the vhost-user client of the
// socket in the pod's directory.
func (p *pod) addOVSPort(t testing.TB) {
	t.Helper()
	sock := filepath.Join(p.socketDir, "net1.sock")
	if _, err := env.ovs.Vsctl("--timeout=30", "add-port", bridge, p.name, "--", "set", "Interface", p.name,
		"type=dpdkvhostuserclient", "options:vhost-server-path="+sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ovs.Vsctl("--timeout=30", "del-port", bridge, p.name) })
}

func (p *pod) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(p.shimDir, name))
	return strings.TrimSpace(string(b))
}

// namespaces is the start of a container's command line, up to containerScript's arguments:
// its own mount namespace, and its own PID namespace or the pod's (pidNS). A container in the
// pod's PID namespace mounts a /proc of it, so the supervisor sees the apps' processes.
func (p *pod) namespaces() []string {
	if p.pidNS == 0 {
		return []string{"unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "--", "sh", "-c", containerScript, "sh"}
	}
	return []string{"nsenter", "-t", strconv.Itoa(p.pidNS), "--pid", "--", "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", "mount -t proc proc /proc\n" + containerScript, "sh"}
}

// sharePIDNamespace gives the pod one PID namespace whose init is a stand-in for the pause
// container, as shareProcessNamespace does: the dataplane's exit does not end the apps.
func (p *pod) sharePIDNamespace(t testing.TB) {
	t.Helper()
	pause := exec.Command("unshare", "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private", "--", "sleep", "1000000")
	must(t, pause.Start())
	t.Cleanup(func() {
		if p.pidNS != 0 {
			_ = syscall.Kill(p.pidNS, syscall.SIGKILL) // its namespace's init: everything in it goes
		}
		_ = pause.Process.Kill()
		_ = pause.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); p.pidNS == 0; time.Sleep(10 * time.Millisecond) {
		if kids := descendants(pause.Process.Pid); len(kids) > 0 && comm(kids[0]) == "sleep" {
			p.pidNS = kids[0]
		} else if time.Now().After(deadline) {
			t.Fatal("the pod's pause process did not start")
		}
	}
}

// dataplane is one run of the supervisor in its own mount and PID namespaces.
type dataplane struct {
	cmd     *exec.Cmd
	logPath string
	addr    string
	done    chan struct{}
	err     error
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

// cpusetCgroup makes a cpuset cgroup (v1) with cpus, as kubelet's static CPU manager gives a
// container its exclusive CPUs: the affinity the supervisor reads comes from it, not taskset.
func cpusetCgroup(t testing.TB, name, cpus string) string {
	t.Helper()
	root := "/sys/fs/cgroup/cpuset"
	dir := filepath.Join(root, name)
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.mems"))
	must(t, err)
	must(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() {
		for range 100 { // the last process leaves the cgroup a moment after it exits
			if os.Remove(dir) == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("cpuset cgroup %s left behind", dir)
	})
	must(t, os.WriteFile(filepath.Join(dir, "cpuset.mems"), mems, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(cpus), 0o644))
	return dir
}

// startDataplane runs the supervisor as the dataplane container would, in a cpuset cgroup of
// cpus, with dpdk-testpmd as every F-Stack process. Like F-Stack, testpmd gets no link-status
// interrupt (--no-lsc-interrupt): with one it would reconnect to a restarted OVS by itself.
func (p *pod) startDataplane(t testing.TB, cpus string, extra ...string) *dataplane {
	t.Helper()
	// The injected dataplane container's root filesystem is read-only.
	return p.startSupervisorIn(t, cpus, true, append([]string{"--program-mode", "--program=dpdk-testpmd", "--program-lcores-per-proc=2", "--ready-telemetry=/mempool/list~mb_pool_0",
		"--primary-args=--total-num-mbufs=8192", "--primary-args=--forward-mode=icmpecho", "--primary-args=--auto-start",
		"--primary-args=--no-lsc-interrupt", "--secondary-args=--no-lsc-interrupt"}, extra...))
}

// startSupervisor runs the supervisor as the dataplane container would, in a cpuset cgroup of
// cpus, with launch saying what it starts as the F-Stack processes.
func (p *pod) startSupervisor(t testing.TB, cpus string, launch []string) *dataplane {
	t.Helper()
	return p.startSupervisorIn(t, cpus, false, launch)
}

// startSupervisorIn is startSupervisor with the container's root filesystem read-only or not.
func (p *pod) startSupervisorIn(t testing.TB, cpus string, readOnlyRoot bool, launch []string) *dataplane {
	t.Helper()
	cg := cpusetCgroup(t, fmt.Sprintf("fsk-dp-%s-%d", p.name, time.Now().UnixNano()), cpus)
	d := &dataplane{addr: freeAddr(t), done: make(chan struct{}),
		logPath: filepath.Join(p.dir, fmt.Sprintf("supervisor-%d.log", time.Now().UnixNano()))}
	args := append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg}, p.namespaces()...)
	args = append(append(args, p.dataplaneArgs("")...),
		env.supervisor, "--spec-file="+p.specFile, "--shim-contexts=standin", "--cpuset-file="+filepath.Join(cg, "cpuset.cpus"), "--hugepages-dir="+podHugeDir, "--config-file="+podConfig,
		"--image-shim-dir="+p.imgShim, "--listen="+d.addr, "--start-timeout=90s", "--grace=5s")
	d.cmd = exec.Command("sh", append(args, launch...)...)
	// The pod's status token, as the injection sets it: /status and /config answer it (and the
	// node, which 127.0.0.1 is not).
	d.cmd.Env = append(os.Environ(), podcontract.EnvStatusToken+"="+statusToken)
	if readOnlyRoot {
		d.cmd.Env = append(d.cmd.Env, readOnlyRootEnv+"=1")
	}
	logFile, err := os.Create(d.logPath)
	must(t, err)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	must(t, d.cmd.Start())
	go func() { d.err = d.cmd.Wait(); logFile.Close(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("supervisor output:\n%s", d.log())
		}
		env.huge.Clean()
	})
	return d
}

func (d *dataplane) log() string { b, _ := os.ReadFile(d.logPath); return string(b) }

// readable is the supervisor's log as a person reads it (logtest.Readable): tests look for
// what a message says in it, whatever the format.
func (d *dataplane) readable() string { return logtest.Readable(d.log()) }

// logIndex is the index of the first line of the supervisor's log (text, every line parsed)
// whose msg contains msg and whose keys have the values of kv (pairs; "" is any value), or -1.
func (d *dataplane) logIndex(t testing.TB, msg string, kv ...any) int {
	t.Helper()
	i, _ := d.logLine(t, msg, kv...)
	return i
}

// logLine is that line and its index (nil, -1 when there is none).
func (d *dataplane) logLine(t testing.TB, msg string, kv ...any) (int, logtest.Line) {
	t.Helper()
	lines, err := logtest.Parse(d.log(), logging.FormatText, logging.ComponentSupervisor)
	if err != nil {
		t.Fatalf("the supervisor's log: %v", err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		want[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
	}
	for i := range lines {
		if l, ok := logtest.Find(lines[i:i+1], msg, want); ok {
			return i, l
		}
	}
	return -1, nil
}

// startedBefore says that the log has process a up, then process b starting.
func (d *dataplane) startedBefore(t testing.TB, upMsg string, a, b int) bool {
	up, start := d.logIndex(t, upMsg, logging.KeyProcess, a), d.logIndex(t, "starting process", logging.KeyProcess, b)
	return up >= 0 && start > up
}

// stop sends SIGTERM to the supervisor (PID 1 of its namespace, as in a container); unshare
// only waits, so the signal goes to its child.
func (d *dataplane) stop() {
	for _, pid := range descendants(d.cmd.Process.Pid) {
		if comm(pid) == "fstack-supervis" {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// exitCode waits for the supervisor to end, bounded.
func (d *dataplane) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-d.done:
	case <-time.After(within):
		t.Fatalf("the supervisor did not exit within %s", within)
	}
	return d.cmd.ProcessState.ExitCode()
}

// waitGeneration waits, bounded, for generation gen to be ready, failing if the supervisor
// exits meanwhile: a dead process starts a new generation in place.
func (d *dataplane) waitGeneration(t testing.TB, p *pod, gen string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); p.file(podcontract.ReadyFile) != gen; time.Sleep(50 * time.Millisecond) {
		select {
		case <-d.done:
			t.Fatalf("the supervisor exited instead of starting generation %s in place: %v", gen, d.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %s not ready within 2 minutes", gen)
		}
	}
	d.waitReady(t)
}

// waitReady bounds the start: EAL init waits for OVS to connect to the vhost-user socket.
func (d *dataplane) waitReady(t testing.TB) {
	t.Helper()
	const within = 120 * time.Second
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			t.Fatalf("the supervisor exited before ready: %v", d.err)
		default:
		}
		if code, _ := d.get(podcontract.ReadyzPath); code == http.StatusOK {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not ready within %s", within)
}

// statusToken is the status token of the tier's pods.
var statusToken = strings.Repeat("5eed", 16)

// get asks the supervisor for path with the pod's status token, as the operator does.
func (d *dataplane) get(path string) (int, string) {
	return d.getWith(path, statusToken)
}

// getWith asks for path sending token (none when empty).
func (d *dataplane) getWith(path, token string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+d.addr+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set(podcontract.StatusTokenHeader, token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// descendants lists every process below pid, from the host's view of /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := ppid(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		out = append(out, children[cur]...)
		queue = append(queue, children[cur]...)
	}
	return out
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	if len(fields) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func (d *dataplane) pidOf(t testing.TB, name string) int {
	t.Helper()
	for _, pid := range descendants(d.cmd.Process.Pid) {
		if comm(pid) == name {
			return pid
		}
	}
	t.Fatalf("no %s under the supervisor", name)
	return 0
}

// appSecondary runs a DPDK program as the app container would: its own mount and PID
// namespaces, seeing only the hugepage volume and the DPDK runtime volume at the pod's paths.
// It is bounded: a secondary that cannot attach may wait forever.
func (p *pod) appSecondary(cpus string, args ...string) (string, error) {
	script := append([]string{"--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "--", "sh", "-c", containerScript, "sh"},
		p.appArgs("secondary", cpus)...)
	script = append(append(script, "timeout", "60"), args...)
	return nodetest.Run("unshare", script...)
}

// pidsOf lists the processes named name under the supervisor, oldest first.
func (d *dataplane) pidsOf(name string) []int {
	var pids []int
	for _, pid := range descendants(d.cmd.Process.Pid) {
		if comm(pid) == name {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
