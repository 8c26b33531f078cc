package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// checkToolsOnTheExclusiveCPU: F-Stack's tools in the injected dataplane container, whose cpuset
// is the one exclusive CPU the kubelet gave it (not CPU 0, which the node reserves). The stand-in
// image's tools are real DPDK secondaries starting EAL as F-Stack's do with patch 0006
// (dataplane-image/standin/tools): plain -c1 would stop at "Cannot set affinity". kubectl exec
// of ff_traffic, `kubectl fstack traffic` and `netstat`, and the supervisor's per-process traffic
// metrics all go through fstack-tool.
func checkToolsOnTheExclusiveCPU(t *testing.T, p *corev1.Pod) {
	t.Helper()
	cpus := strings.TrimSpace(execIn(t, p, podcontract.DataplaneContainer, "sh", "-c", "grep Cpus_allowed_list /proc/self/status"))
	if strings.HasSuffix(cpus, "\t0") || strings.Contains(cpus, "\t0,") || strings.Contains(cpus, "\t0-") {
		t.Fatalf("the dataplane's cpuset holds CPU 0 (%q): this step needs it without", cpus)
	}
	out := execIn(t, p, podcontract.DataplaneContainer, "ff_traffic", "-p", "0", "-s")
	if !regexp.MustCompile(`(?m)^\d+,\d+,\d+,\d+,\d+,\d+$`).MatchString(out) {
		t.Errorf("kubectl exec ff_traffic -p 0 -s on %s printed no counter line:\n%s", cpus, out)
	}

	plugin := filepath.Join(t.TempDir(), "kubectl-fstack")
	if out, err := exec.Command("go", "build", "-o", plugin, "../kubectl-fstack/cmd/kubectl-fstack").CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-fstack: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		// The flags go before the arguments: what follows -- is the tool's.
		argv := append([]string{args[0], "-n", p.Namespace, "--kubeconfig", env.Kubeconfig}, args[1:]...)
		cmd := exec.Command(plugin, argv...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	for _, args := range [][]string{{"traffic", p.Name}, {"netstat", p.Name, "-p", "0", "--", "-an"}} {
		rc, stdout, stderr := run(args...)
		if rc != 0 {
			t.Fatalf("kubectl fstack %s: exit %d\n%s%s", strings.Join(args, " "), rc, stdout, stderr)
		}
		want := map[string]string{"traffic": `(?m)^\d+,\d+,\d+,\d+,\d+,\d+$`, "netstat": `Active Internet connections`}[args[0]]
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("kubectl fstack %s printed no %q:\n%s", strings.Join(args, " "), want, stdout)
		}
	}
	if rc, _, stderr := run("netstat", p.Name, "-p", "7"); rc == 0 || !strings.Contains(stderr, "--process 7") {
		t.Errorf("kubectl fstack netstat -p 7 of a one-process pod: exit %d, %q; want a refusal naming --process", rc, stderr)
	}

	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(podcontract.SupervisorPort)), podcontract.MetricsPath)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if !regexp.MustCompile(`(?m)^fstack_traffic_rx_packets_total\{process="0"\} \d+$`).Match(body) {
		t.Errorf("/metrics has no per-process traffic counter (ff_traffic at scrape time) on %s:\n%s", cpus, body)
	}
}
