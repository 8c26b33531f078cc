// Command bench measures the operator against a real kube-apiserver and etcd (envtest), with the
// operator running as its own process (bin/fstack-operator), as in a cluster:
//   - pod create latency through the API server, the same pod in several arms created in turn
//     (pods.go): no webhook, our injection webhook, and the floor any webhook costs on this
//     machine (a minimal HTTPS server, in its own process like the operator, that allows without a
//     patch or returns the operator's patch without computing anything, floor.go); with the API
//     server's, the operator's and the floor server's own account of the time (metrics.go, report.go);
//   - 1000 StackInstances created at once: time until all are Valid, and the operator's peak RSS.
//
// hack/bench-operator.sh builds the operator and runs it. Figures are ratios from one run: the
// machines are shared and noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

func main() {
	root := flag.String("root", ".", "repository root")
	operator := flag.String("operator", "bin/fstack-operator", "operator binary")
	pods := flag.Int("pods", 200, "pods per arm")
	stacks := flag.Int("stacks", 1000, "StackInstances created at once")
	http1 := flag.Bool("http1", false, "reach the webhooks at 0.0.0.0 (Linux connects it to loopback), which the API server does not take for loopback, so it speaks HTTP/1.1 to them as it does to a service reference (it offers HTTP/2 only to loopback URLs)")
	audit := flag.Bool("audit", false, "also print the API server's own time per create and arm, from an audit log of pod creates (written in batches; it costs every arm alike)")
	operatorEnv := flag.String("operator-env", "", "comma-separated KEY=VALUE added to the operator's environment (GOMAXPROCS, GOGC, ...)")
	floorAddr := flag.String("floor-server", "", "internal: serve the floor webhook on this address and nothing else")
	certDir := flag.String("cert-dir", "", "internal: the floor webhook's certificate directory")
	flag.Parse()
	var err error
	if *floorAddr != "" {
		err = serveFloor(*floorAddr, *certDir)
	} else {
		err = run(*root, *operator, *pods, *stacks, *http1, *audit, strings.FieldsFunc(*operatorEnv, func(r rune) bool { return r == ',' }))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(root, operator string, pods, stacks int, http1, audit bool, operatorEnv []string) error {
	env := testenv.Environment(root)
	testenv.InstallWebhooks(env, root)
	auditLog := ""
	if audit {
		var err error
		if auditLog, err = enableAudit(env); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(filepath.Dir(auditLog)) }() // after the API server stops
	}
	if http1 {
		env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
		env.WebhookInstallOptions.LocalServingHostExternalName = "0.0.0.0"
	}
	cfg, err := testenv.Start(env)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		"kube-fstack-system": nil, "injected": {fsv1.InjectionLabel: "enabled"}, "plain": nil, "stacks": nil,
		floorNS: nil, floorPatchNS: nil,
	} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			return err
		}
	}
	op, err := startOperator(operator, cfg, &env.WebhookInstallOptions, operatorEnv)
	if err != nil {
		return err
	}
	defer op.stop()
	si, err := sampleStack("vhost-user")
	if err != nil {
		return err
	}
	si.Namespace = "injected"
	// Each pod's address from its attachment: the webhook's per-pod path without claiming an
	// address. A static address serves one pod (the bench's 200 would be refused after the
	// first), and a pool's AddressClaim is an API write per pod that the floor, returning a fixed
	// patch, does not make: the ratio compares the injection's cost with the floor's.
	for i := range si.Spec.Ports {
		if v4 := si.Spec.Ports[i].IPv4; v4 != nil {
			v4.From, v4.Address, v4.Gateway, v4.Pool = fsv1.AddressAttachment, "", "", nil
		}
	}
	if err := c.Create(ctx, si); err != nil {
		return fmt.Errorf("create the stack (is the operator's webhook up?): %w", err)
	}
	b, err := newPodBench(ctx, c, cfg, root, op, &env.WebhookInstallOptions)
	if err != nil {
		return err
	}
	defer b.stop()
	b.auditLog = auditLog
	if err := b.run(ctx, pods); err != nil {
		return err
	}
	return manyStacks(ctx, c, si, stacks, op.cmd.Process.Pid)
}

// operatorProcess is the operator binary running against envtest.
type operatorProcess struct {
	cmd *exec.Cmd
	// dir holds its kubeconfig and log.
	dir string
	// metrics is the operator's metrics endpoint.
	metrics string
}

// stop ends the operator and removes its files.
func (o *operatorProcess) stop() {
	_ = o.cmd.Process.Kill()
	_, _ = o.cmd.Process.Wait()
	_ = os.RemoveAll(o.dir)
}

// startOperator runs the operator binary against envtest, serving the webhooks envtest registered.
func startOperator(bin string, cfg *rest.Config, wh *envtest.WebhookInstallOptions, extraEnv []string) (*operatorProcess, error) {
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
	metrics, probe := freeAddr(), freeAddr()
	// Plain HTTP metrics: the bench reads the operator's own account of its time on loopback,
	// and an authenticated scrape would add TokenReviews to the API server it measures.
	cmd := exec.Command(bin, "--namespace=kube-fstack-system", "--manage-certs=false", "--metrics-insecure",
		"--cert-dir="+wh.LocalServingCertDir, "--webhook-host="+wh.LocalServingHost,
		"--webhook-port="+strconv.Itoa(wh.LocalServingPort), "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe,
		"--log-level=error")
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), extraEnv...)
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
		out, err := exec.Command("curl", "-sf", "http://"+probe+"/readyz").CombinedOutput()
		if err == nil {
			return &operatorProcess{cmd: cmd, dir: dir, metrics: "http://" + metrics + "/metrics"}, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("operator not ready after 60s (%s); log: %s", strings.TrimSpace(string(out)), log.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sampleStack(name string) (*fsv1.StackInstance, error) {
	stacks, err := fixtures.ReadStacks()
	if err != nil {
		return nil, err
	}
	if stacks[name] == nil {
		return nil, fmt.Errorf("no sample StackInstance %q", name)
	}
	return stacks[name], nil
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

// freeAddr returns a loopback address with a port nobody listens on right now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
