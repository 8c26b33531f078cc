// Command bench measures, on the local cluster with the chart installed (hack/bench-cluster.sh),
// pod create → Ready for a pod bound to a StackInstance in an opted-in namespace (injected: the
// dataplane starts, the launcher waits for it, then the app) against the same pod in a namespace
// that did not opt in, interleaved in one run, and prints medians and the ratio.
//
// Two more arms are floors that no injector can go below: the plain pod with a do-nothing native
// sidecar, and with a sidecar that has the dataplane's hook and probes (a postStart exec hook,
// so the launcher is in place before the app starts, readiness and liveness probes) but does
// nothing else. The kubelet starts a pod's app containers only in the sync after the one that
// saw its sidecar running, and every sync waits for the next PLEG relist, once a second on a
// kubelet without evented PLEG; the floors measure what that costs here.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

const (
	injectedNS = "bench-fstack"
	plainNS    = "bench-plain"
	stackName  = "bench-vhost"
)

func main() {
	n := flag.Int("n", 10, "pods of each kind, created one at a time, interleaved")
	image := flag.String("dataplane-image", "", "the injected pods' dataplane image (the StackInstance's spec.dataplane.image); default: the operator's (the stand-in on the local cluster). Run once with each image to compare the real F-Stack image with the stand-in")
	flag.Parse()
	if err := run(*n, *image); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int, image string) error {
	env, err := framework.FromEnv()
	if err != nil {
		return err
	}
	setup := env.SetupManifests(injectedNS, plainNS, stackName, "10.99.0.20", "")
	if out, err := env.KubectlIn([]byte(setup), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	defer func() {
		_, _ = env.Kubectl("delete", "namespace", injectedNS, plainNS, "--wait=true", "--timeout=120s")
	}()
	if image != "" {
		patch := fmt.Sprintf(`{"spec":{"dataplane":{"image":%q}}}`, image)
		if out, err := env.Kubectl("patch", "-n", injectedNS, "stackinstance/"+stackName, "--type=merge", "-p", patch); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
	}
	if _, err := env.Kubectl("wait", "-n", injectedNS, "--for=condition=Valid", "stackinstance/"+stackName, "--timeout=60s"); err != nil {
		return err
	}
	arms := []*arm{
		{name: "without injection", ns: plainNS, pod: pod},
		{name: "injected", ns: injectedNS, pod: pod},
		{name: "floor: do-nothing sidecar", ns: plainNS, pod: func(ns, name string) *corev1.Pod { return withSidecar(pod(ns, name), false) }},
		{name: "floor: sidecar, hook+probes", ns: plainNS, pod: func(ns, name string) *corev1.Pod { return withSidecar(pod(ns, name), true) }},
	}
	// One warm-up of each, so first-use costs (image layers, the webhook's cache) are not counted.
	for i := -1; i < n; i++ {
		for j, a := range arms {
			d, err := createToReady(env, a.ns, a.pod(a.ns, fmt.Sprintf("a%d-p%d", j, i+1)))
			if err != nil {
				return err
			}
			if i >= 0 {
				a.times = append(a.times, d)
			}
		}
	}
	fmt.Printf("pod create -> Ready, %d pods each, interleaved (one pod at a time); dataplane image: %s\n", n, orDefault(image, "the operator's default"))
	for _, a := range arms {
		fmt.Printf("  %-28s p50 %-8v max %v\n", a.name+":", ms(median(a.times)), ms(slices.Max(a.times)))
	}
	plain, injected, bare, probed := arms[0], arms[1], arms[2], arms[3]
	ratio := func(a, b *arm) float64 { return float64(median(a.times)) / float64(median(b.times)) }
	line := func(what string, a, b *arm, tail string) {
		fmt.Printf("%-58s %.2fx %s\n", what+", p50:", ratio(a, b), tail)
	}
	line("injected / without injection", injected, plain, "(goal <= 1.5x)")
	line("floor: do-nothing native sidecar / without", bare, plain, "(no native sidecar can do better)")
	line("floor: sidecar with the dataplane's hook+probes / without", probed, plain, "(the architecture's sidecar)")
	line("injected / do-nothing floor", injected, bare, "(goal <= 1.15x)")
	line("injected / that floor", injected, probed, "(what the dataplane itself adds)")
	return nil
}

// arm is one kind of pod, timed from create to Ready.
type arm struct {
	name  string
	ns    string
	pod   func(ns, name string) *corev1.Pod
	times []time.Duration
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// createToReady creates the pod, waits until it is Ready, then deletes it and waits until it and
// (for an injected pod) its CPU and hugepages are free again, so the next pod starts alike.
func createToReady(env *framework.Env, ns string, want *corev1.Pod) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pods := env.Clientset.CoreV1().Pods(ns)
	name := want.Name
	start := time.Now()
	created, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("create %s/%s: %w", ns, name, err)
	}
	// Polled every 20 ms rather than watched: a watch here sometimes ended early, and 20 ms is
	// small against the 1-3 s being measured.
	var took time.Duration
	err = framework.Poll("pod "+ns+"/"+name+" Ready", 3*time.Minute, 20*time.Millisecond, func() (bool, string, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if framework.PodReady(p) {
			took = time.Since(start)
			return true, "", nil
		}
		return false, framework.PodSummary(p), nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w\n%s", err, env.Dump("_output/bench-cluster", ns))
	}
	grace := int64(0)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return 0, err
	}
	err = framework.Poll("pod "+name+" gone with its port", 2*time.Minute, 200*time.Millisecond, func() (bool, string, error) {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); err == nil {
			return false, "pod still exists", nil
		}
		ports, err := env.PortsOfPod(string(created.UID))
		return err == nil && len(ports) == 0, fmt.Sprintf("ports %v", ports), nil
	})
	return took, err
}

// pod is the sample Nginx of config/samples/local-cluster, as a bare pod.
func pod(ns, name string) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app": "bench", "kubefstack.io/stack": stackName}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "nginx", Image: "localhost/nginx:1.22", ImagePullPolicy: corev1.PullIfNotPresent,
				// Debian's nginx.conf is refused under the shim (sendfile on, worker_processes
				// auto): the sample's configuration, written where nginx reads it.
				Command:   []string{"sh", "-c", "echo '" + shimConf + "' >/tmp/nginx.conf && exec nginx -c /tmp/nginx.conf"},
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
			}},
		},
	}
}

// shimConf is config/samples/local-cluster's nginx.conf in one line, with what the launcher
// would add (it only judges commands that run nginx directly).
const shimConf = `user www-data; worker_processes 1; daemon off; pid /run/nginx.pid; error_log stderr; ` +
	`events { use epoll; multi_accept on; } http { sendfile off; access_log off; ` +
	`server { listen 80 reuseport default_server; root /var/www/html; index index.nginx-debian.html; } }`

// floorConf makes the floor's sidecar an HTTP server on its own port (the app's Nginx has 80).
const floorConf = `events {} http { access_log off; server { listen 8099; return 204; } }`

// withSidecar adds a native sidecar that does nothing but exist (the pause image), or, with
// probes, one with the hook and probes the injector gives the dataplane: a postStart exec hook
// (that returns at once) and readiness and liveness probes answered by Nginx on 8099, with the
// same periods and thresholds. So the floors differ from the injected pod only by what the
// dataplane does.
func withSidecar(p *corev1.Pod, probes bool) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	c := corev1.Container{Name: "sidecar", Image: "localhost/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy: &always, Resources: corev1.ResourceRequirements{Limits: res, Requests: res}}
	if probes {
		c.Image = "localhost/nginx:1.22"
		c.Command = []string{"sh", "-c", "echo '" + floorConf + "' >/tmp/floor.conf && exec nginx -c /tmp/floor.conf -g 'daemon off; pid /tmp/floor.pid;'"}
		probe := func(period, failures int32) *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8099)}},
				PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1}
		}
		c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		c.ReadinessProbe, c.LivenessProbe = probe(1, 3), probe(5, 3)
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}
