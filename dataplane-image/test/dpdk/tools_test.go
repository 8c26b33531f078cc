package dpdk

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// F-Stack's ff_* tools in a dataplane container whose cpuset lacks CPU 0 (every exclusive-CPU
// container of a node that reserves CPUs 0-1 for the system). The tools are the stand-in image's
// (dataplane-image/standin/tools: F-Stack cannot be built here), real DPDK secondaries that
// start EAL exactly as F-Stack's tools/compat/ff_ipc.c does with patch 0006. Upstream's -c1
// pins them to CPU 0 and EAL stops; run as ff_<name> through fstack-tool they attach on the
// container's CPU, and the supervisor's per-process traffic metrics, which run ff_traffic at
// every scrape, are there.
func TestToolsRunOnTheContainersCPUs(t *testing.T) {
	tools := buildTools(t)
	p := newPod(t, "fstool", "10.99.7.14", 1)
	d := p.startDataplane(t, "1", "--ff-traffic="+filepath.Join(tools, "ff_traffic"))
	d.waitReady(t)

	out, err := p.inDataplaneContainer(t, "1", filepath.Join(tools, "f-stack", "traffic"), "-p", "0", "-s")
	if err == nil || !strings.Contains(out, "Cannot set affinity") {
		t.Fatalf("the tool as upstream starts it (-c1: CPU 0) in a cpuset of CPU 1: err=%v, want EAL's \"Cannot set affinity\":\n%s", err, out)
	}
	out, err = p.inDataplaneContainer(t, "1", filepath.Join(tools, "ff_traffic"), "-p", "0", "-s")
	if err != nil {
		t.Fatalf("ff_traffic through fstack-tool in a cpuset of CPU 1: %v\n%s", err, out)
	}
	if !strings.Contains(out, "CPU 1;") {
		t.Errorf("the tool did not say it ran on CPU 1:\n%s", out)
	}
	if l := pciScanLines.FindString(out); l != "" {
		t.Errorf("the tool scanned the node's PCI bus (%q): it needs --no-pci as the shim has:\n%s", l, out)
	}
	if _, err := fftraffic.Parse(out); err != nil {
		t.Errorf("ff_traffic -s through fstack-tool: %v", err)
	}
	out, err = p.inDataplaneContainer(t, "1", filepath.Join(tools, "ff_netstat"), "-t", "0", "-an")
	if err != nil || !strings.Contains(out, "Active Internet connections") {
		t.Errorf("ff_netstat -t 0 -an through fstack-tool: %v\n%s", err, out)
	}

	code, body := d.get(podcontract.MetricsPath)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if !regexp.MustCompile(`(?m)^fstack_traffic_rx_packets_total\{process="0"\} \d+$`).MatchString(body) {
		t.Errorf("/metrics has no per-process traffic counter from ff_traffic in a cpuset without CPU 0:\n%s", body)
	}
}

// buildTools builds fstack-tool, with its tools' dir moved to DIR/f-stack (-ldflags -X; the lock
// and the placement stay where the image has them, in the container's mounts), the stand-in
// tools in DIR/f-stack, and DIR/ff_<name> links to the wrapper, as the image installs them.
func buildTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	toolDir := filepath.Join(dir, "f-stack")
	wrapper := filepath.Join(dir, "fstack-tool")
	build := exec.Command("go", "build", "-ldflags", "-X main.toolDir="+toolDir, "-o", wrapper,
		"github.com/kube-fstack/kube-fstack/dataplane-image/cmd/fstack-tool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fstack-tool: %v\n%s", err, out)
	}
	if out, err := exec.Command("../../standin/tools/build.sh", toolDir).CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in tools: %v\n%s", err, out)
	}
	for _, n := range []string{"traffic", "netstat", "top"} {
		must(t, os.Symlink(wrapper, filepath.Join(dir, "ff_"+n)))
	}
	return dir
}

// inDataplaneContainer runs a command as `kubectl exec` into the dataplane container would: the
// pod's volumes mounted where the image has them, in a cpuset cgroup of cpus.
func (p *pod) inDataplaneContainer(t *testing.T, cpus string, args ...string) (string, error) {
	t.Helper()
	cg := cpusetCgroup(t, "fsk-dp-exec-"+p.name+"-"+filepath.Base(t.TempDir()), cpus)
	script := append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg}, p.namespaces()...)
	script = append(append(append(script, p.dataplaneArgs("")...), "timeout", "60"), args...)
	out, err := exec.Command("sh", script...).CombinedOutput()
	return string(out), err
}
