package nodetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// OVS is a private OVS-DPDK instance: ovsdb-server on a private socket, and the DPDK
// ovs-vswitchd in a network namespace of its own, so kernel ports (veths) attached to its
// bridges live there and not on the host.
type OVS struct {
	Dir    string // run, db and log files
	Netns  string // where ovs-vswitchd runs
	Bridge string
	Huge   *Hugepages
	// prefix is ovs-vswitchd's DPDK file prefix: its hugepage files are <prefix>map_*.
	prefix string
	db     *exec.Cmd
	vsd    *exec.Cmd
}

// OVSPages is what the instance needs free: OVS takes about 450 MiB of 2 MiB pages.
const OVSPages = 260

// StartOVS creates and starts an instance under dir with one netdev bridge.
func StartOVS(dir, bridge string, huge *Hugepages) (*OVS, error) {
	o := &OVS{Dir: dir, Netns: fmt.Sprintf("fsk-ovs-%d", os.Getpid()), Bridge: bridge, Huge: huge, prefix: fmt.Sprintf("fsk%d", os.Getpid())}
	steps := []func() error{o.createDB, o.StartDB, o.configureDPDK, func() error { return AddNetns(o.Netns) }, o.StartVswitchd, o.addBridge}
	for _, step := range steps {
		if err := step(); err != nil {
			o.Stop()
			return nil, err
		}
	}
	return o, nil
}

// StartDBOnly starts ovsdb-server alone on a new database under dir: OVSDB as it is on a node
// whose ovs-vswitchd never brought DPDK up (dpdk_initialized stays false). Stop it with StopDB.
func StartDBOnly(dir string) (*OVS, error) {
	o := &OVS{Dir: dir}
	if err := o.createDB(); err != nil {
		return nil, err
	}
	if err := o.StartDB(); err != nil {
		return nil, err
	}
	if _, err := o.Vsctl("--no-wait", "init"); err != nil {
		o.StopDB()
		return nil, err
	}
	return o, nil
}

// DBSock is the OVSDB unix socket the plugin talks to.
func (o *OVS) DBSock() string { return filepath.Join(o.Dir, "db.sock") }

// env keeps everything of the instance in its dir, ovs-vswitchd's DPDK runtime dir too
// (RUNTIME_DIRECTORY): by default that is /var/run/dpdk/<prefix>, which DPDK never removes.
func (o *OVS) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+o.Dir, "OVS_DBDIR="+o.Dir, "OVS_LOGDIR="+o.Dir, "OVS_SYSCONFDIR="+o.Dir,
		"RUNTIME_DIRECTORY="+o.Dir)
}

func (o *OVS) createDB() error {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	_, err := Run("ovsdb-tool", "create", filepath.Join(o.Dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	return err
}

// StartDB starts ovsdb-server and waits until it answers.
func (o *OVS) StartDB() error {
	o.db = exec.Command("ovsdb-server", filepath.Join(o.Dir, "conf.db"),
		"--remote=punix:"+o.DBSock(), "--unixctl="+filepath.Join(o.Dir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(o.Dir, "ovsdb-server.log"), "--pidfile="+filepath.Join(o.Dir, "ovsdb-server.pid"))
	o.db.Env = o.env()
	o.db.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := o.db.Start(); err != nil {
		return fmt.Errorf("start ovsdb-server: %w", err)
	}
	return waitFor("ovsdb-server socket", func() bool {
		c, err := net.Dial("unix", o.DBSock())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// StopDB kills ovsdb-server, as a crash would.
func (o *OVS) StopDB() { stop(o.db, syscall.SIGKILL); o.db = nil }

func (o *OVS) configureDPDK() error {
	_, err := o.Vsctl("--no-wait", "init", "--", "set", "Open_vSwitch", ".",
		"other_config:dpdk-init=true", "other_config:dpdk-socket-mem=256", "other_config:dpdk-socket-limit=512",
		"other_config:pmd-cpu-mask=0x2", "other_config:pmd-maxsleep=10000",
		fmt.Sprintf("other_config:dpdk-extra=--no-pci --file-prefix=%s --huge-dir=%s", o.prefix, o.Huge.Dir))
	return err
}

// StartVswitchd starts the DPDK ovs-vswitchd in the instance's namespace and waits for DPDK.
func (o *OVS) StartVswitchd() error {
	o.vsd = exec.Command("ip", "netns", "exec", o.Netns, VswitchdDPDK, "unix:"+o.DBSock(),
		"--log-file="+filepath.Join(o.Dir, "ovs-vswitchd.log"), "--pidfile="+filepath.Join(o.Dir, "ovs-vswitchd.pid"))
	o.vsd.Env = o.env()
	o.vsd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := o.vsd.Start(); err != nil {
		return fmt.Errorf("start ovs-vswitchd: %w", err)
	}
	return waitFor("DPDK init in ovs-vswitchd (see "+o.Dir+"/ovs-vswitchd.log)", func() bool {
		out, err := o.Vsctl("--no-wait", "get", "Open_vSwitch", ".", "dpdk_initialized")
		return err == nil && strings.TrimSpace(out) == "true"
	})
}

// StopVswitchd kills ovs-vswitchd and removes its hugepage files. The other DPDK programs'
// files stay: a dataplane test's primary runs on across an OVS restart, as a pod's does.
func (o *OVS) StopVswitchd() {
	stop(o.vsd, syscall.SIGTERM)
	o.vsd = nil
	files, _ := filepath.Glob(filepath.Join(o.Huge.Dir, o.prefix+"*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// Restart kills both daemons and starts them again on the same database.
func (o *OVS) Restart() error {
	o.StopVswitchd()
	o.StopDB()
	if err := o.StartDB(); err != nil {
		return err
	}
	return o.StartVswitchd()
}

func (o *OVS) addBridge() error {
	_, err := o.Vsctl("--timeout=30", "add-br", o.Bridge, "--", "set", "bridge", o.Bridge, "datapath_type=netdev")
	return err
}

// Vsctl runs ovs-vsctl against this instance.
func (o *OVS) Vsctl(args ...string) (string, error) {
	cmd := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + o.DBSock()}, args...)...)
	cmd.Env = o.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ovs-vsctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Ofctl runs ovs-ofctl against the bridge (its socket is in the run dir).
func (o *OVS) Ofctl(args ...string) (string, error) {
	cmd := exec.Command("ovs-ofctl", args...)
	cmd.Env = o.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Stop tears the instance down: daemons, namespace, hugepage files.
func (o *OVS) Stop() {
	o.StopVswitchd()
	o.StopDB()
	DelNetns(o.Netns)
}

func stop(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitFor polls cond for up to a minute: a bound on setup, not a timed assertion.
func waitFor(what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + what)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
