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
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

const nativeStack, nativeApp = "e2e-native", "e2e-native"

// nativeManifests are a StackInstance whose processes are a program linked with libfstack
// (spec.program, mode PerProcess or Nginx) and a Deployment whose one container is that
// program, from the stand-in image: for PerProcess fstack-standin-program, which reads
// config.ini as F-Stack's ff_init does and becomes testpmd with F-Stack's EAL argv (standing in
// for F-Stack's helloworld); for Nginx fstack-standin-nginx, a master that forks one such
// testpmd per worker (standing in for F-Stack's Nginx), with its nginx.conf from a ConfigMap
// that leaves worker_processes and fstack_conf to the supervisor (dataplane-image/standin/native).
// No shim, no sidecar: the container becomes the dataplane.
func nativeManifests(mode string) string {
	stack := fmt.Sprintf(`apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %s, namespace: %s}
spec:
  processes: 1
  program: {mode: %s}
  ports:
  - name: data
    attachment: %s
    device: {vhostUser: {queues: 1}}
    ipv4: {address: %s/24, gateway: 10.99.0.1}
  dataplane: {hugePages: {amount: %s}}
`, nativeStack, injectedNS, mode, env.Attachment, stackAddr, framework.StackHugePages)
	c := corev1.Container{Name: "hello", Image: env.StandinImg, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/usr/local/bin/fstack-standin-program"}}
	opts := []fixtures.PodOption{fixtures.WithNamespace(injectedNS), fixtures.WithStackLabel(nativeStack),
		fixtures.WithAnnotation("k8s.v1.cni.cncf.io/networks", env.Networks)}
	var objs []any
	if mode == "Nginx" {
		c.Name, c.Command = "nginx", []string{"/usr/local/bin/fstack-standin-nginx", "-c", "/etc/nginx/fstack/nginx.conf"}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/nginx/fstack"}}
		opts = append(opts, fixtures.WithConfigMapVolume("conf", nativeApp))
		objs = append(objs, fixtures.ConfigMap(nativeApp, injectedNS, map[string]string{"nginx.conf": "error_log stderr;\nevents {}\n"}))
	}
	objs = append(objs, fixtures.Deployment(nativeApp, append(opts, fixtures.WithContainer(c))...))
	return stack + "---\n" + fixtures.YAML(objs...)
}

// checkNativeProgram: the program container is the pod's dataplane (no sidecar), Ready through
// the supervisor, answering pings at the stack's address, with the supervisor's metrics up.
func checkNativeProgram(mode string, wantLog ...string) func(t *testing.T) {
	return func(t *testing.T) {
		mustApply(t, nativeManifests(mode))
		p := waitPodOf(t, nativeApp)
		if len(p.Spec.InitContainers) != 0 || len(p.Spec.Containers) != 1 {
			t.Fatalf("a native program's pod has one container and no sidecar: %d init, %d containers", len(p.Spec.InitContainers), len(p.Spec.Containers))
		}
		c := p.Spec.Containers[0]
		if c.Name != podcontract.DataplaneContainer || len(c.Args) < 3 || c.Args[0] != "--native="+mode || !strings.HasPrefix(c.Args[2], "/usr/local/bin/fstack-standin-") {
			t.Fatalf("the program container did not become the dataplane: name %q args %q", c.Name, c.Args)
		}
		checkPing(t, p)
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
		logs = logtest.Readable(logs)
		for _, want := range wantLog {
			if !strings.Contains(logs, want) {
				t.Errorf("the dataplane's log lacks %q:\n%s", want, logs)
			}
		}
		if out, err := env.Kubectl("delete", "deployment,configmap", nativeApp, "-n", injectedNS, "--ignore-not-found", "--wait=true", "--timeout=90s"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		waitPodResourcesGone(t, p)
		if out, err := env.Kubectl("delete", "stackinstance", nativeStack, "-n", injectedNS, "--ignore-not-found", "--wait=true"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}
