// Command bench measures the operator against a real kube-apiserver and etcd (envtest), with the
// operator running as its own process (bin/fstack-operator), as in a cluster:
//   - pod create latency through the API server with the injection webhook vs the same pod in a
//     namespace the webhook does not serve, interleaved, p50/p99 and their ratios;
//   - 1000 StackInstances created at once: time until all are Valid, and the operator's peak RSS.
//
// hack/bench-operator.sh builds the operator and runs it. Figures are ratios from one run: the
// machines are shared and noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
	"github.com/kube-fstack/kube-fstack/operator/internal/testenv"
)

func main() {
	root := flag.String("root", ".", "repository root")
	operator := flag.String("operator", "bin/fstack-operator", "operator binary")
	pods := flag.Int("pods", 200, "pods per series")
	stacks := flag.Int("stacks", 1000, "StackInstances created at once")
	flag.Parse()
	if err := run(*root, *operator, *pods, *stacks); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(root, operator string, pods, stacks int) error {
	env := testenv.Environment(root)
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start envtest (KUBEBUILDER_ASSETS=%q): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		"kube-fstack-system": nil, "injected": {fsv1.InjectionLabel: "enabled"}, "plain": nil, "stacks": nil,
	} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			return err
		}
	}
	op, err := startOperator(operator, cfg, &env.WebhookInstallOptions)
	if err != nil {
		return err
	}
	defer func() { _ = op.Process.Kill(); _, _ = op.Process.Wait() }()
	si, err := sampleStack(root, "vhost-user")
	if err != nil {
		return err
	}
	si.Namespace = "injected"
	if err := c.Create(ctx, si); err != nil {
		return fmt.Errorf("create the stack (is the operator's webhook up?): %w", err)
	}
	if err := podLatency(ctx, c, root, pods); err != nil {
		return err
	}
	return manyStacks(ctx, c, si, stacks, op.Process.Pid)
}

// startOperator runs the operator binary against envtest, serving the webhooks envtest registered.
func startOperator(bin string, cfg *rest.Config, wh *envtest.WebhookInstallOptions) (*exec.Cmd, error) {
	dir, err := os.MkdirTemp("", "fstack-bench-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--namespace=kube-fstack-system", "--manage-certs=false",
		"--cert-dir="+wh.LocalServingCertDir, "--webhook-host="+wh.LocalServingHost,
		"--webhook-port="+strconv.Itoa(wh.LocalServingPort), "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:18081",
		"--zap-log-level=error")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	log, err := os.Create(filepath.Join(dir, "operator.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command("curl", "-sf", "http://127.0.0.1:18081/readyz").CombinedOutput()
		if err == nil {
			return cmd, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("operator not ready after 60s (%s); log: %s", strings.TrimSpace(string(out)), log.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sampleStack(root, name string) (*fsv1.StackInstance, error) {
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", name+".yaml"))
	if err != nil {
		return nil, err
	}
	sis, err := manifest.StackInstances(data)
	if err != nil {
		return nil, err
	}
	return &sis[0], nil
}

// podLatency creates the same pod alternately where the webhook injects it and where no
// webhook is called.
func podLatency(ctx context.Context, c client.Client, root string, n int) error {
	raw, err := os.ReadFile(filepath.Join(root, "internal", "inject", "testdata", "nginx-vhost.yaml"))
	if err != nil {
		return err
	}
	tmpl := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(raw, tmpl); err != nil {
		return err
	}
	raw, err = os.ReadFile(filepath.Join(root, "internal", "inject", "testdata", "nginx-vhost.yaml.injected"))
	if err != nil {
		return err
	}
	pre := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(raw, pre); err != nil {
		return err
	}
	series := map[string][]time.Duration{}
	for i := range n + 10 {
		for _, ns := range []string{"injected", "plain", "pre"} {
			pod := tmpl.DeepCopy()
			if ns == "pre" { // the injected pod stored without a webhook call: the object's own cost
				pod, ns = pre.DeepCopy(), "plain"
				pod.Name = "pre-"
			} else {
				pod.Name = ""
			}
			pod.Namespace, pod.Name = ns, fmt.Sprintf("%sbench-%d", pod.Name, i)
			start := time.Now()
			if err := c.Create(ctx, pod); err != nil {
				return fmt.Errorf("create pod in %s: %w", ns, err)
			}
			if i >= 10 { // the first creates warm caches and connections
				key := ns
				if strings.HasPrefix(pod.Name, "pre-") {
					key = "pre"
				}
				series[key] = append(series[key], time.Since(start))
			}
			if ns == "injected" && len(pod.Spec.InitContainers) == 0 {
				return fmt.Errorf("pod %s/%s was not injected", ns, pod.Name)
			}
		}
	}
	inj, plain, noHook := stats(series["injected"]), stats(series["plain"]), stats(series["pre"])
	fmt.Printf("pod create, %d pods per series (interleaved)\n", n)
	fmt.Printf("  with injection webhook   p50 %7.2f ms   p99 %7.2f ms\n", ms(inj.p50), ms(inj.p99))
	fmt.Printf("  no webhook (baseline)    p50 %7.2f ms   p99 %7.2f ms\n", ms(plain.p50), ms(plain.p99))
	fmt.Printf("  injected pod, no webhook p50 %7.2f ms   p99 %7.2f ms   (the bigger object alone)\n", ms(noHook.p50), ms(noHook.p99))
	fmt.Printf("  ratio webhook/baseline   p50 %7.2fx     p99 %7.2fx   (goal <= 1.1x)\n",
		float64(inj.p50)/float64(plain.p50), float64(inj.p99)/float64(plain.p99))
	fmt.Printf("  ratio webhook/injected-no-webhook p50 %5.2fx  p99 %5.2fx   (the webhook call alone)\n",
		float64(inj.p50)/float64(noHook.p50), float64(inj.p99)/float64(noHook.p99))
	return nil
}

// manyStacks creates n StackInstances at once and waits until the operator marks all Valid.
func manyStacks(ctx context.Context, c client.Client, tmpl *fsv1.StackInstance, n, pid int) error {
	before := rssKB(pid, "VmRSS")
	start := time.Now()
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "stacks", Name: fmt.Sprintf("s-%04d", i)}, Spec: tmpl.Spec}
			errs <- c.Create(ctx, si)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	created := time.Since(start)
	for {
		list := &fsv1.StackInstanceList{}
		if err := c.List(ctx, list, client.InNamespace("stacks")); err != nil {
			return err
		}
		valid := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, fsv1.ConditionValid) {
				valid++
			}
		}
		if valid == n {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("only %d of %d StackInstances Valid after 5 minutes", valid, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
	total := time.Since(start)
	fmt.Printf("%d StackInstances created at once (16 parallel clients)\n", n)
	fmt.Printf("  all created after        %7.2f s\n", created.Seconds())
	fmt.Printf("  all Valid after          %7.2f s   (goal < 30 s)\n", total.Seconds())
	fmt.Printf("  operator RSS before      %7.1f MB\n", float64(before)/1024)
	fmt.Printf("  operator peak RSS        %7.1f MB   (goal < 100 MB)\n", float64(rssKB(pid, "VmHWM"))/1024)
	return nil
}

type summary struct{ p50, p99 time.Duration }

func stats(d []time.Duration) summary {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return summary{at(0.50), at(0.99)}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rssKB(pid int, key string) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
