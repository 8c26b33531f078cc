package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
)

// F-Stack's own tools (ff_netstat, ff_top, ff_traffic) run inside the pod's dataplane container,
// where the image installs them behind fstack-tool (a CPU of the container's cpuset, one tool
// at a time): these commands are `kubectl exec` of the right tool with the right process
// selector, for every F-Stack process of the pod unless -p names one.

// toolCommand is one of the commands below.
type toolCommand struct {
	name, tool  string
	short, long string
	// argv returns the tool's arguments for processes first..last (inclusive).
	argv func(o *toolOptions, first, last int) [][]string
	// extraArgs: the command passes what follows -- to the tool.
	extraArgs bool
}

type toolOptions struct {
	clusterFlags
	process  int
	interval int
	count    int
	extra    []string
}

var toolCommands = []toolCommand{{
	name: "netstat", tool: "ff_netstat",
	short: "Show a pod's F-Stack connections (ff_netstat -an for each process, or the arguments after --)",
	long: `Run F-Stack's ff_netstat in the pod's dataplane container for each F-Stack process (its
own stack: connections, listeners and counters are per process), or for the one -p names.
Arguments after -- go to ff_netstat instead of -an (for example -- -s -p tcp, -- -i, -- -rn).`,
	extraArgs: true,
	argv: func(o *toolOptions, first, last int) [][]string {
		var runs [][]string
		for k := first; k <= last; k++ {
			args := []string{"-t", strconv.Itoa(k)}
			if len(o.extra) == 0 {
				args = append(args, "-an")
			}
			runs = append(runs, append(args, o.extra...))
		}
		return runs
	},
}, {
	name: "top", tool: "ff_top",
	short: "Show each F-Stack process's CPU split and poll-loop rate (ff_top)",
	long: `Run F-Stack's ff_top in the pod's dataplane container: for each process (or the one -p
names), idle, sys and usr percentages and poll loops over each interval of --interval seconds,
--count times.`,
	argv: func(o *toolOptions, first, last int) [][]string {
		return [][]string{{"-p", strconv.Itoa(first), "-P", strconv.Itoa(last), "-d", strconv.Itoa(o.interval), "-n", strconv.Itoa(o.count)}}
	},
}, {
	name: "traffic", tool: "ff_traffic",
	short: "Show each F-Stack process's packet and byte counters (ff_traffic)",
	long: `Run F-Stack's ff_traffic in the pod's dataplane container. Without --count, one line of
cumulative counters per process (or for the one -p names): rx packets, rx bytes, tx packets,
tx bytes, rx dropped, tx dropped (mbuf segments, since the process started). With --count N,
the rates over N intervals of --interval seconds.`,
	argv: func(o *toolOptions, first, last int) [][]string {
		var runs [][]string
		for k := first; k <= last; k++ {
			args := []string{"-p", strconv.Itoa(k)}
			if o.count == 0 {
				args = append(args, "-s")
			} else {
				args = append(args, "-d", strconv.Itoa(o.interval), "-n", strconv.Itoa(o.count))
			}
			runs = append(runs, args)
		}
		return runs
	},
}}

// podExecutor runs a command in a container of a pod, its output to stdout and stderr.
type podExecutor interface {
	exec(ctx context.Context, pod *corev1.Pod, container string, command []string, stdout, stderr io.Writer) error
}

func newToolCommands(stdout, stderr io.Writer) []*cobra.Command {
	var cmds []*cobra.Command
	for _, tc := range toolCommands {
		o := &toolOptions{}
		use := tc.name + " POD [-n NAMESPACE] [-p PROCESS]"
		if tc.extraArgs {
			use += " [-- " + tc.tool + " ARGS...]"
		} else {
			use += " [--interval SECONDS] [--count N]"
		}
		cmd := &cobra.Command{
			Use:   use,
			Short: tc.short,
			Long: tc.long + `

It runs the tool with kubectl exec's rights (create on pods/exec in the pod's namespace) in the
container ` + podcontract.DataplaneContainer + `; the tools take turns with each other and with
the dataplane's metrics, so a long run delays a scrape.`,
			Args: func(cmd *cobra.Command, args []string) error {
				if n := cmd.ArgsLenAtDash(); n >= 0 {
					if !tc.extraArgs {
						return fmt.Errorf("%s takes no tool arguments after --", tc.name)
					}
					args = args[:n]
				}
				return cobra.ExactArgs(1)(cmd, args)
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				if n := cmd.ArgsLenAtDash(); n >= 0 {
					o.extra = args[n:]
				}
				cfg, ns, err := o.restConfig()
				if err != nil {
					return err
				}
				c, err := newClient(cfg)
				if err != nil {
					return err
				}
				ex, err := newAPIExecutor(cfg)
				if err != nil {
					return err
				}
				return runTool(cmd.Context(), c, ex, tc, o, ns, args[0], stdout, stderr)
			},
		}
		o.add(cmd.Flags())
		cmd.Flags().IntVarP(&o.process, "process", "p", -1, "the F-Stack process (0 to processes-1); all of them when not given")
		if !tc.extraArgs {
			cmd.Flags().IntVar(&o.interval, "interval", 1, "seconds per interval")
			count := 1
			if tc.name == "traffic" {
				count = 0
			}
			cmd.Flags().IntVar(&o.count, "count", count, "intervals to show")
		}
		cmd.ValidArgsFunction = completeNames(&o.clusterFlags, stackPodNames)
		completeNamespaceFlag(cmd, &o.clusterFlags)
		cmds = append(cmds, cmd)
	}
	return cmds
}

// runTool runs tc's tool in the pod, once per argv it gives.
func runTool(ctx context.Context, c client.Client, ex podExecutor, tc toolCommand, o *toolOptions, ns, name string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !tc.extraArgs { // netstat has neither flag
		if o.interval < 1 || o.interval > 3600 {
			return fmt.Errorf("--interval %d: give 1 to 3600 seconds", o.interval)
		}
		if o.count < 0 || o.count > 3600 || (tc.name == "top" && o.count == 0) {
			return fmt.Errorf("--count %d: give 1 to 3600 intervals", o.count)
		}
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	procs, err := podProcesses(pod)
	if err != nil {
		return err
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s/%s is %s: F-Stack's tools ask a running dataplane", ns, name, pod.Status.Phase)
	}
	first, last := 0, procs-1
	if o.process >= 0 {
		if o.process >= procs {
			return fmt.Errorf("--process %d: pod %s/%s runs %d F-Stack process(es), 0 to %d", o.process, ns, name, procs, procs-1)
		}
		first, last = o.process, o.process
	}
	runs := tc.argv(o, first, last)
	for i, args := range runs {
		if len(runs) > 1 {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "# process %d\n", first+i)
		}
		command := append([]string{tc.tool}, args...)
		if err := ex.exec(ctx, pod, podcontract.DataplaneContainer, command, stdout, stderr); err != nil {
			return toolError(ns, name, command, err)
		}
	}
	return nil
}

// podProcesses is the number of F-Stack processes of an injected pod, from its spec snapshot.
func podProcesses(pod *corev1.Pod) (int, error) {
	raw, ok := pod.Annotations[podcontract.SpecAnnotation]
	if !ok {
		return 0, fmt.Errorf("pod %s/%s runs no F-Stack dataplane (kube-fstack's injector did not admit it)", pod.Namespace, pod.Name)
	}
	spec, err := snapshot.Decode([]byte(raw), pod.Annotations[podcontract.SpecVersionAnnotation])
	if err != nil {
		return 0, fmt.Errorf("pod %s/%s: its spec snapshot: %w", pod.Namespace, pod.Name, err)
	}
	return max(int(spec.Processes), 1), nil
}

// toolError says why a tool run failed, in words a user acts on.
func toolError(ns, name string, command []string, err error) error {
	var exit utilexec.CodeExitError
	switch {
	case errors.As(err, &exit):
		// The tool said why on stderr; its status is the command's.
		return &exitCodeError{code: exit.Code, err: fmt.Errorf("%s in pod %s/%s exited with status %d", command[0], ns, name, exit.Code)}
	case apierrors.IsForbidden(err):
		return fmt.Errorf("pod %s/%s: running %s needs create on pods/exec in %s (kubectl auth can-i create pods/exec -n %s): %s", ns, name, command[0], ns, ns, safe(err.Error()))
	}
	return fmt.Errorf("pod %s/%s: %s: %s", ns, name, command[0], safe(err.Error()))
}

// apiExecutor runs commands through the API server's pods/exec, WebSocket first and SPDY where
// the API server is older, as kubectl exec does.
type apiExecutor struct {
	cfg *rest.Config
	rc  rest.Interface
}

func newAPIExecutor(cfg *rest.Config) (*apiExecutor, error) {
	cfg = rest.CopyConfig(cfg)
	// A tool's run streams for as long as it takes (ff_top --count 60): the request timeout a
	// status read has must not cut it.
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &apiExecutor{cfg: cfg, rc: cs.CoreV1().RESTClient()}, nil
}

func (a *apiExecutor) exec(ctx context.Context, pod *corev1.Pod, container string, command []string, stdout, stderr io.Writer) error {
	req := a.rc.Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(a.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(a.cfg, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}
