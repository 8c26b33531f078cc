package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// PodConfig is what `config -o json|yaml` prints: what one pod's dataplane really runs.
type PodConfig struct {
	metav1.TypeMeta `json:",inline"`
	Namespace       string `json:"namespace"`
	Pod             string `json:"pod"`
	// Stack is the pod's kubefstack.io/stack label.
	Stack string `json:"stack,omitempty"`
	// Addresses are what the pod's F-Stack serves (as status shows them).
	Addresses []ServedAddress `json:"addresses,omitempty"`
	// Running is the supervisor's /config: the generation, config.ini, the EAL argv of each
	// process, the shim's mode (or the program's).
	Running podcontract.RunningConfig `json:"running"`
}

type configOptions struct {
	clusterFlags
	output *outputFlags
}

func newConfigCommand(stdout io.Writer) *cobra.Command {
	o := &configOptions{}
	cmd := &cobra.Command{
		Use:   "config POD [-n NAMESPACE] [-o json|yaml]",
		Short: "Show what a pod's dataplane really runs: its config.ini, each process's EAL argv, the shim's mode, the addresses it serves",
		Long: `Show what the dataplane of a running pod runs now, as its supervisor rendered it for the
current generation (not what the StackInstance would render today: render shows that): the
config.ini F-Stack reads, the EAL argv F-Stack builds from it for each process, the shim's mode
(or the program linked with libfstack), and the addresses the pod serves.

It reads the supervisor's /config through the API server's pod proxy (get on pods/proxy, as
status needs); -o json|yaml prints a PodConfig (apiVersion cli.kubefstack.io/v1alpha1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), stdout, args[0])
		},
	}
	o.add(cmd.Flags())
	o.output = newOutputFlags(cmd)
	cmd.ValidArgsFunction = completeNames(&o.clusterFlags, stackPodNames)
	completeNamespaceFlag(cmd, &o.clusterFlags)
	return cmd
}

func (o *configOptions) run(ctx context.Context, stdout io.Writer, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, wide := o.output.table(); wide {
		return fmt.Errorf("--output wide: config has no table columns; use json or yaml, or no -o")
	}
	if err := o.output.validate(); err != nil {
		return err
	}
	cfg, ns, err := o.restConfig()
	if err != nil {
		return err
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if _, injected := pod.Annotations[podcontract.SpecAnnotation]; !injected {
		return fmt.Errorf("pod %s/%s runs no F-Stack dataplane (kube-fstack's injector did not admit it)", ns, name)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s/%s is %s: only a running pod's dataplane can say what it runs", ns, name, pod.Status.Phase)
	}
	r, err := newProxyStatusReader(cfg)
	if err != nil {
		return err
	}
	rc, err := r.readConfig(ctx, pod)
	if err != nil {
		return configError(ns, name, err)
	}
	pc := &PodConfig{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "PodConfig"},
		Namespace: ns, Pod: name, Stack: pod.Labels[fsv1.StackLabel], Running: *rc}
	ps := &PodStatus{}
	ps.addAddresses(pod)
	pc.Addresses = ps.Addresses
	if table, _ := o.output.table(); table {
		return writeConfig(stdout, pc)
	}
	return o.output.printObject(pc, stdout)
}

// podConfigReader reads one pod's /config.
type podConfigReader interface {
	readConfig(ctx context.Context, pod *corev1.Pod) (*podcontract.RunningConfig, error)
}

// readConfig asks the pod's supervisor for /config through the API server's pod proxy, as
// readStatus asks for /status.
func (p *proxyStatusReader) readConfig(ctx context.Context, pod *corev1.Pod) (*podcontract.RunningConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := p.get(ctx, pod, podcontract.ConfigPath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rc, err := podcontract.ReadRunningConfig(resp.Body)
	if err != nil {
		return nil, &statusError{statusBadAnswer, err}
	}
	return rc, nil
}

// configError says why /config could not be read, in words for this command (the reader's
// kinds name /status).
func configError(ns, name string, err error) error {
	var se *statusError
	if errors.As(err, &se) {
		switch se.kind {
		case statusBadAnswer:
			return fmt.Errorf("pod %s/%s: %w", ns, name, se.err)
		case statusForbidden:
			return fmt.Errorf("pod %s/%s: reading %s needs get on pods/proxy in %s (kubectl auth can-i get pods/proxy -n %s): %s", ns, name, podcontract.ConfigPath, ns, ns, safe(se.err.Error()))
		case statusNoToken:
			return fmt.Errorf("pod %s/%s: its dataplane answers %s only to the node and to the pod's status token (%s), which this pod lacks or the dataplane refused (a pod injected before kube-fstack gave pods one: re-create it): %s", ns, name, podcontract.ConfigPath, podcontract.EnvStatusToken, safe(se.err.Error()))
		case statusNotServed:
			return fmt.Errorf("pod %s/%s: its dataplane serves no %s (an image older than this plugin): %s", ns, name, podcontract.ConfigPath, safe(se.err.Error()))
		case statusUnreachable:
			return fmt.Errorf("pod %s/%s: %s not answered (the dataplane starting, a NetworkPolicy on port %d, or the pod gone): %s", ns, name, podcontract.ConfigPath, podcontract.SupervisorPort, safe(se.err.Error()))
		}
	}
	return fmt.Errorf("pod %s/%s: read %s through the API server's pod proxy: %s", ns, name, podcontract.ConfigPath, safe(err.Error()))
}

// writeConfig prints the pod's config for a terminal; every string the pod sent is printed as
// safe text. config.ini last, as it is written.
func writeConfig(w io.Writer, pc *PodConfig) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s/%s (stack %s), generation %d\n", safe(pc.Namespace), safe(pc.Pod), safe(orDash(pc.Stack)), pc.Running.Generation)
	switch {
	case pc.Running.Program != "":
		fmt.Fprintf(&b, "Program: %s (linked with libfstack, no shim)\n", safe(pc.Running.Program))
	default:
		fmt.Fprintf(&b, "Shim: %s\n", safe(orDash(pc.Running.ShimMode)))
	}
	addrs := make([]string, 0, len(pc.Addresses))
	for _, a := range pc.Addresses {
		addrs = append(addrs, fmt.Sprintf("%s (port %d)", a.Address, a.Port))
	}
	fmt.Fprintf(&b, "Addresses: %s\n", safe(orDash(strings.Join(addrs, ", "))))
	for i, argv := range pc.Running.EAL {
		fmt.Fprintf(&b, "EAL proc %d: %s\n", i, safe(strings.Join(argv, " ")))
	}
	b.WriteString("config.ini:\n")
	for _, line := range strings.SplitAfter(pc.Running.ConfigINI, "\n") {
		switch line = strings.TrimSuffix(line, "\n"); {
		case line != "":
			b.WriteString("  " + safe(line) + "\n")
		case !strings.HasSuffix(b.String(), "config.ini:\n"):
			b.WriteString("\n") // a blank line between sections, not indented
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
