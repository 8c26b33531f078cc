package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const nativeStack, nativeApp = "e2e-native", "e2e-native"

// nativeManifests are a StackInstance whose processes are a program linked with libfstack
// (spec.program, mode PerProcess) and a Deployment whose one container is that program: the
// stand-in image's fstack-standin-program, which reads config.ini as F-Stack's ff_init does
// and becomes testpmd with F-Stack's EAL argv (dataplane-image/standin/native). It stands in
// for F-Stack's helloworld. No shim, no sidecar: the container becomes the dataplane.
func nativeManifests() string {
	stack := fmt.Sprintf(`apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %s, namespace: %s}
spec:
  processes: 1
  program: {mode: PerProcess}
  ports:
  - name: data
    attachment: %s
    device: {vhostUser: {queues: 1}}
    ipv4: {address: %s/24, gateway: 10.99.0.1}
  dataplane: {hugePages: {amount: %s}}
`, nativeStack, injectedNS, env.Attachment, stackAddr, framework.StackHugePages)
	dep := fixtures.Deployment(nativeApp, fixtures.WithNamespace(injectedNS), fixtures.WithStackLabel(nativeStack),
		fixtures.WithAnnotation("k8s.v1.cni.cncf.io/networks", env.Networks),
		fixtures.WithContainer(corev1.Container{Name: "hello", Image: env.StandinImg, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/usr/local/bin/fstack-standin-program"}}))
	return stack + "---\n" + fixtures.YAML(dep)
}

// checkNativeProgram: the program container is the pod's dataplane (no sidecar), Ready through
// the supervisor, answering pings at the stack's address, with the supervisor's metrics up.
func checkNativeProgram(t *testing.T) {
	mustApply(t, nativeManifests())
	p := waitPodOf(t, nativeApp)
	if len(p.Spec.InitContainers) != 0 || len(p.Spec.Containers) != 1 {
		t.Fatalf("a native program's pod has one container and no sidecar: %d init, %d containers", len(p.Spec.InitContainers), len(p.Spec.Containers))
	}
	c := p.Spec.Containers[0]
	if c.Name != podcontract.DataplaneContainer || len(c.Args) < 3 || c.Args[0] != "--native=PerProcess" || c.Args[2] != "/usr/local/bin/fstack-standin-program" {
		t.Fatalf("the program container did not become the dataplane: name %q args %q", c.Name, c.Args)
	}
	checkPing(t)
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(podcontract.SupervisorPort)), podcontract.MetricsPath)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"fstack_processes_up 1", "fstack_nic_telemetry_up 1", `fstack_process_starts_total{process="0"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s lacks %q:\n%s", url, want, body)
		}
	}
	logs, _ := env.Kubectl("logs", "-n", injectedNS, p.Name, "-c", podcontract.DataplaneContainer)
	if !strings.Contains(logs, "--proc-type=primary --proc-id=0") || !strings.Contains(logs, "stand-in F-Stack program (not F-Stack)") {
		t.Errorf("the supervisor did not start the program as start.sh does:\n%s", logs)
	}
	if out, err := env.Kubectl("delete", "deployment", nativeApp, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitPodResourcesGone(t, p)
	if out, err := env.Kubectl("delete", "stackinstance", nativeStack, "-n", injectedNS, "--ignore-not-found"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
