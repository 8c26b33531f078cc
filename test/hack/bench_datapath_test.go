package hack_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// wrk 4.1.0's report with --latency, as Debian's wrk prints it.
const wrkOutput = `Running 10s test @ http://10.99.0.10/
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.05ms  310.22us  12.50ms   91.20%
    Req/Sec    30.12k     1.10k   32.00k    70.00%
  Latency Distribution
     50%  980.00us
     75%    1.10ms
     90%    1.30ms
     99%    2.25ms
  299712 requests in 10.00s, 243.21MB read
  Socket errors: connect 0, read 3, write 0, timeout 0
Requests/sec:  29970.12
Transfer/sec:     24.32MB
`

func benchHelper(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found: hack/install-deps.sh installs it")
	}
	cmd := exec.Command(py, append([]string{filepath.Join(repoRoot(t), "hack", "lib", "bench_datapath.py")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBenchDatapathReadsWrk(t *testing.T) {
	out, err := benchHelper(t, wrkOutput, "wrk")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Microseconds and milliseconds both become milliseconds; socket errors are kept as a note.
	if got, want := strings.TrimSpace(out), "29970 0.980 2.250 socket-errors=0/3/0/0"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A run whose answers were errors measured nothing: it must fail, not print a rate.
func TestBenchDatapathRefusesErrorResponses(t *testing.T) {
	out, err := benchHelper(t, strings.Replace(wrkOutput, "Requests/sec:", "  Non-2xx or 3xx responses: 12\nRequests/sec:", 1), "wrk")
	if err == nil || !strings.Contains(out, "12 responses were not 2xx/3xx") {
		t.Fatalf("want a refusal naming the 12 error responses, got err=%v: %s", err, out)
	}
	out, err = benchHelper(t, "Running 10s test\nunable to connect to 10.99.0.10:80 Connection refused\n", "wrk")
	if err == nil || !strings.Contains(out, "no Requests/sec") {
		t.Fatalf("want a refusal of output without results, got err=%v: %s", err, out)
	}
}

// The kernel arm is the stack pod's app container without anything that binds it to a stack
// or was injected: no stack label, none of the injected volumes, no dataplane; its ConfigMap
// stays, and it gets the stack pod's whole CPU limit.
func TestBenchDatapathKernelPod(t *testing.T) {
	pod := `{"metadata": {"name": "nginx-fstack-abc", "namespace": "fstack-demo",
	   "labels": {"app": "nginx-fstack", "kubefstack.io/stack": "local-vhost", "pod-template-hash": "abc", "tier": "web"}},
	 "spec": {"nodeName": "node1",
	  "initContainers": [{"name": "fstack-dataplane", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}}],
	  "containers": [{"name": "nginx", "image": "localhost/nginx:1.22", "command": ["/var/run/kube-fstack/shim/fstack-launcher", "--", "nginx", "-c", "/etc/nginx/kube-fstack/nginx.conf"],
	    "env": [{"name": "INJECTED", "value": "x"}],
	    "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/kube-fstack"}, {"name": "fstack-shim", "mountPath": "/opt/fstack"}],
	    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}],
	  "volumes": [{"name": "conf", "configMap": {"name": "nginx-fstack-conf"}}, {"name": "fstack-shim", "emptyDir": {}}]}}`
	out, err := benchHelper(t, pod, "cpu-limit")
	if err != nil || strings.TrimSpace(out) != "1500" {
		t.Fatalf("cpu-limit: got %q (%v), want 1500 (the dataplane's 1 and the app's 500m)", out, err)
	}
	out, err = benchHelper(t, pod, "kernel-pod", "1500", "kernel-nginx", "nginx")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			NodeName   string `json:"nodeName"`
			Containers []struct {
				Name         string              `json:"name"`
				Command      []string            `json:"command"`
				Args         []string            `json:"args"`
				Env          []any               `json:"env"`
				VolumeMounts []map[string]string `json:"volumeMounts"`
				Resources    struct {
					Limits map[string]string `json:"limits"`
				} `json:"resources"`
			} `json:"containers"`
			InitContainers []any            `json:"initContainers"`
			Volumes        []map[string]any `json:"volumes"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for k := range got.Metadata.Labels {
		if strings.HasPrefix(k, "kubefstack.io/") || k == "app" {
			t.Errorf("label %s kept: the kernel arm would be injected or counted as the stack's pod", k)
		}
	}
	if got.Metadata.Labels["tier"] != "web" {
		t.Errorf("the workload's own labels go with it, got %v", got.Metadata.Labels)
	}
	if len(got.Spec.Containers) != 1 || len(got.Spec.InitContainers) != 0 || got.Spec.Containers[0].Env != nil {
		t.Fatalf("want the app container alone, without the injected environment: %s", out)
	}
	c := got.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "nginx -c /etc/nginx/kube-fstack/nginx.conf" || strings.Join(c.Args, " ") != "-g daemon off;" {
		t.Errorf("want the app's own command, not the shim's launcher, with the daemon off the launcher adds: %q %q", c.Command, c.Args)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0]["name"] != "conf" || len(got.Spec.Volumes) != 1 {
		t.Errorf("want only the ConfigMap volume and its mount: %s", out)
	}
	if c.Resources.Limits["cpu"] != "1500m" || got.Spec.NodeName != "node1" {
		t.Errorf("want the stack pod's CPU limit on its node: %s", out)
	}

	// A stack pod without CPU limits (the lab's Shared demo) gives the kernel arm none: a limit
	// of 0m below the arm's request is refused by the API server.
	out, err = benchHelper(t, pod, "kernel-pod", "0", "kernel-nginx", "nginx")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var unlimited struct {
		Spec struct {
			Containers []struct {
				Resources struct {
					Limits map[string]string `json:"limits"`
				} `json:"resources"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &unlimited); err != nil || len(unlimited.Spec.Containers) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	if cpu, ok := unlimited.Spec.Containers[0].Resources.Limits["cpu"]; ok {
		t.Errorf("no CPU limit on the stack pod, but the kernel arm gets %q: %s", cpu, out)
	}
}

func TestBenchDatapathSummary(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	writeFile(t, results, "stack 30000 1.0 2.0 1.5\nkernel 10000 2.0 8.0 0.5\nstack 32000 1.1 2.2 1.5\nkernel 12000 2.2 8.8 0.6\nstack 31000 0.9 2.4 1.5\nkernel 11000 2.1 8.4 0.55\n", 0o644)
	out, err := benchHelper(t, "", "summary", results)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"31000.00 [30000.00-32000.00]", "stack/kernel", "2.82x", "0.48x", "0.26x", "2.73x"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// Issue 40: the demo's stack takes its addresses from a pool, so the bench measures the address
// the measured pod serves (its kubefstack.io/addresses annotation), not a static spec address.
func TestBenchDatapathMeasuresTheServedAddress(t *testing.T) {
	pod := `{"metadata": {"name": "nginx-fstack-1", "annotations": {"kubefstack.io/addresses": "0:data=2001:db8::11,0:data=10.99.0.11"}}}`
	out, err := benchHelper(t, pod, "served-url")
	if err != nil || strings.TrimSpace(out) != "http://10.99.0.11/" {
		t.Fatalf("got %q (%v), want http://10.99.0.11/", out, err)
	}
	out, err = benchHelper(t, `{"metadata": {"name": "plain"}}`, "served-url")
	if err == nil || !strings.Contains(out, "set STACK_URL") {
		t.Fatalf("a pod serving nothing: want a refusal saying to set STACK_URL, got err=%v: %s", err, out)
	}
}

// Issue 40 §2: the run's F-Stack-by-hand arms give kube-fstack's own overhead, held to its goal
// (>= 0.97x the requests/s, p99 <= 1.1x), for the shim and for F-Stack's Nginx.
func TestBenchDatapathOverheadAgainstFStackByHand(t *testing.T) {
	results := filepath.Join(t.TempDir(), "results")
	writeFile(t, results, "stack 30000 1.0 2.0 1.5\nkernel 10000 2.0 8.0 0.5\nbyhand-shim 30500 1.0 1.9 1.4\n"+
		"fstack-nginx 40000 0.8 3.0 1.2\nbyhand-nginx 50000 0.7 2.0 1.2\n", 0o644)
	out, err := benchHelper(t, "", "summary", results)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"stack/byhand-shim", "stack against F-Stack by hand: goal met (requests/s 0.98x",
		"fstack-nginx/byhand-nginx", "fstack-nginx against F-Stack by hand: GOAL NOT MET (requests/s 0.80x", "p99 1.50x",
		"fstack-nginx/kernel", "byhand-shim/kernel"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// Issue 40 §2: F-Stack's own Nginx (spec.program) cannot be the kernel arm's model: its container
// is F-Stack's, which serves nothing on the kernel. The bench says so instead of measuring a pod
// that never becomes ready.
func TestBenchDatapathRefusesAProgramPodAsTheKernelModel(t *testing.T) {
	pod := `{"metadata": {"name": "fstack-nginx-1", "namespace": "fstack-demo"}, "spec": {"containers": [{"name": "fstack-dataplane", "image": "fstack-nginx"}]}}`
	out, err := benchHelper(t, pod, "kernel-pod", "0", "k", "fstack-dataplane")
	if err == nil || !strings.Contains(out, "PROGRAM_SELECTOR") || !strings.Contains(out, "spec.program") {
		t.Fatalf("want a refusal pointing at PROGRAM_SELECTOR, got err=%v: %s", err, out)
	}
}
