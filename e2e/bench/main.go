// Command bench measures, on the local cluster with the chart installed (hack/bench-cluster.sh),
// pod create → Ready for a pod bound to a StackInstance in an opted-in namespace (injected: the
// dataplane starts, the launcher waits for it, then the app) against the same pod in a namespace
// that did not opt in, interleaved in one run, and prints medians and the ratio.
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

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

const (
	injectedNS = "bench-fstack"
	plainNS    = "bench-plain"
	stackName  = "bench-vhost"
)

func main() {
	n := flag.Int("n", 10, "pods of each kind, created one at a time, interleaved")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	env, err := framework.FromEnv()
	if err != nil {
		return err
	}
	setup := env.SetupManifests(injectedNS, plainNS, stackName, "10.99.0.20", "02:fe:00:00:00:14")
	if out, err := env.KubectlIn([]byte(setup), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	defer func() {
		_, _ = env.Kubectl("delete", "namespace", injectedNS, plainNS, "--wait=true", "--timeout=120s")
	}()
	if _, err := env.Kubectl("wait", "-n", injectedNS, "--for=condition=Valid", "stackinstance/"+stackName, "--timeout=60s"); err != nil {
		return err
	}
	// One warm-up of each, so first-use costs (image layers, the webhook's cache) are not counted.
	var injected, plain []time.Duration
	for i := -1; i < n; i++ {
		for _, ns := range []string{injectedNS, plainNS} {
			d, err := createToReady(env, ns, fmt.Sprintf("p%d", i+1))
			if err != nil {
				return err
			}
			if i < 0 {
				continue
			}
			if ns == injectedNS {
				injected = append(injected, d)
			} else {
				plain = append(plain, d)
			}
		}
	}
	mi, mp := median(injected), median(plain)
	fmt.Printf("pod create -> Ready, %d pods each, interleaved (one pod at a time)\n", n)
	fmt.Printf("  without injection: p50 %v  max %v\n", ms(mp), ms(slices.Max(plain)))
	fmt.Printf("  injected:          p50 %v  max %v\n", ms(mi), ms(slices.Max(injected)))
	fmt.Printf("  ratio injected/plain p50: %.2fx (goal <= 1.5x)\n", float64(mi)/float64(mp))
	return nil
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// createToReady creates the pod, waits until it is Ready, then deletes it and waits until it and
// (for an injected pod) its CPU and hugepages are free again, so the next pod starts alike.
func createToReady(env *framework.Env, ns, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pods := env.Clientset.CoreV1().Pods(ns)
	start := time.Now()
	created, err := pods.Create(ctx, pod(ns, name), metav1.CreateOptions{})
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
				Command:   []string{"nginx", "-g", "daemon off;"},
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
			}},
		},
	}
}
