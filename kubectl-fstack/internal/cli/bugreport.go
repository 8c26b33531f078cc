package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The bounds bug-report collects under by default: a day of a busy supervisor's log is a few
// thousand lines, and an archive of 100Mi is still one a maintainer downloads from an issue.
const (
	defaultLogLines  = 5000
	defaultFileSize  = "2Mi"
	defaultTotalSize = "100Mi"
	// minTotalSize leaves room for README.md and index.json beside a file of --max-file-size.
	minTotalSize = 1 << 20
	minFileSize  = 1 << 10
	// maxTotalSize and maxLogLines keep the arithmetic on them (a log asked for with one line
	// more, four files' worth) far from overflowing; no issue tracker takes more anyway.
	maxTotalSize = 1 << 40
	maxLogLines  = math.MaxInt32
)

type bugReportOptions struct {
	clusterFlags
	allNamespaces bool
	selector      string
	output        string
	logLines      int64
	fileSize      string
	totalSize     string
	limits        BugReportLimits
	// now is the clock the archive is named and dated by; tests set it.
	now func() time.Time
}

func newBugReportCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &bugReportOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "bug-report [-n NAMESPACE | -A] [-l SELECTOR] [--output FILE] [--max-log-lines N] [--max-file-size SIZE] [--max-size SIZE] [STACK...]",
		Short: "Collect what a bug report needs into one redacted archive: the stacks, their pods' supervisors and logs, the operator, doctor's report, versions",
		Long: `Collect into one .tar.gz what a maintainer asks for first, for the StackInstances of a namespace
(-n, else the context's; -A every namespace; -l those whose labels match; or the STACKs named) and
the pods bound to them:

  per StackInstance  the object, its conditions, its <name>-fstack ConfigMap, its events, and what
                     kubectl fstack status -o yaml prints for it
  per bound pod      the pod, its events, its supervisor's /status and /config (through the API
                     server's pod proxy with the pod's status token, as status and config read them),
                     the logs of every container (the dataplane's supervisor, the apps' launchers),
                     the previous container's too when one restarted
  the cluster        the operator's Deployments (found by the chart's labels, as version finds
                     them), their pods, events and logs, the AddressClaims of their namespaces, the
                     DataNetworks, the nodes running the pods or carrying a node agent's report (the
                     node and its report), the API server's version, doctor -o json
  versions           the plugin's, the operator's and every image the pods run (images.txt)

README.md and index.json in the archive list every file and every item that could not be
collected, with the reason (forbidden by RBAC, a pod that does not answer, the size bound): one
item that fails never stops the report. Secrets are never read, and everything is redacted
before it is written: the value of FSTACK_STATUS_TOKEN and of every variable naming a token,
password, secret or key, secret flags' arguments, the last-applied annotation and managedFields
in the objects; those values, the status token's header and bearer tokens in every file; the
kubeconfig is not included. There is no option to turn it off: the archive is meant for a public
issue.

The archive is written to --output (default kube-fstack-bug-report-<UTC time>.tar.gz in the
current directory), whose path is printed on stdout; a summary on stderr counts what was not
collected. Exit status 0 when the archive was written, even with items missing; 1 when no
archive was written (the output cannot be written, the API server does not answer at all, an
interrupt); 2 for a wrong invocation (a flag, an argument, a kubeconfig that cannot be loaded),
as doctor's 2.`,
		Example: `  # The StackInstances of the context's namespace
  kubectl fstack bug-report

  # Two stacks of namespace web, into a file named for the issue
  kubectl fstack bug-report -n web edge core --output issue-123.tar.gz

  # Every namespace's stacks labelled tier=edge, with longer logs
  kubectl fstack bug-report -A -l tier=edge --max-log-lines 20000 --max-file-size 8Mi`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), stdout, stderr, args)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return invocationError(err) })
	o.add(cmd.Flags())
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "the StackInstances of every namespace")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Selector (label query) on the StackInstances, as kubectl get's: -l key1=value1,key2=value2")
	cmd.Flags().StringVar(&o.output, "output", "", "the archive to write (default kube-fstack-bug-report-<UTC time>.tar.gz in the current directory)")
	cmd.Flags().Int64Var(&o.logLines, "max-log-lines", defaultLogLines, "each container's log: its last N lines at most")
	cmd.Flags().StringVar(&o.fileSize, "max-file-size", defaultFileSize, "no file of the archive larger than SIZE (a log keeps its end): a quantity, 512Ki, 2Mi")
	cmd.Flags().StringVar(&o.totalSize, "max-size", defaultTotalSize, "the archive's files take SIZE at most; what does not fit is listed as not collected: a quantity, 100Mi, 1Gi")
	_ = cmd.MarkFlagFilename("output", "tar.gz", "tgz")
	cmd.ValidArgsFunction = completeNamesUpTo(&o.clusterFlags, stackNames, 0)
	completeNamespaceFlag(cmd, &o.clusterFlags)
	return cmd
}

// invocationError is err with exit status 2: the command was given wrong, as doctor's 2.
func invocationError(err error) error {
	if err == nil {
		return nil
	}
	return &exitCodeError{code: 2, err: err}
}

func (o *bugReportOptions) run(ctx context.Context, stdout, stderr io.Writer, names []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Interrupted, the report stops asking and writes no archive: a temporary file left behind,
	// or a half archive under the name a user attaches, would be worse than none.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := o.validate(names); err != nil {
		return invocationError(err)
	}
	src, ns, err := o.connect()
	if err != nil {
		return invocationError(err)
	}
	if o.allNamespaces {
		ns = ""
	}
	out, err := o.report(ctx, src, reportScope{namespace: ns, names: names, selector: o.selector}, stderr)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, out)
	return err
}

// validate refuses, before anything is asked or written, flags that do not go together or parse.
func (o *bugReportOptions) validate(names []string) error {
	if len(names) > 0 && o.allNamespaces {
		return fmt.Errorf("name StackInstances or give -A, not both: names are looked up in -n's namespace")
	}
	if len(names) > 0 && o.selector != "" {
		return fmt.Errorf("name StackInstances or give -l, not both")
	}
	if _, err := labels.Parse(o.selector); err != nil {
		return fmt.Errorf("-l %q: %w", o.selector, err)
	}
	if o.logLines < 1 || o.logLines > maxLogLines {
		return fmt.Errorf("--max-log-lines %d: give 1 to %d (default %d)", o.logLines, maxLogLines, defaultLogLines)
	}
	var err error
	if o.limits.FileBytes, err = sizeFlag("--max-file-size", o.fileSize, minFileSize, maxTotalSize); err != nil {
		return err
	}
	if o.limits.TotalBytes, err = sizeFlag("--max-size", o.totalSize, minTotalSize, maxTotalSize); err != nil {
		return err
	}
	if o.limits.FileBytes > o.limits.TotalBytes-indexReserve(o.limits.TotalBytes) {
		return fmt.Errorf("--max-file-size %s does not fit in --max-size %s with room for the index: give a smaller --max-file-size or a larger --max-size",
			o.fileSize, o.totalSize)
	}
	o.limits.LogLines = o.logLines
	return o.validateOutput()
}

// sizeFlag parses a size flag as a quantity of bytes (2Mi, 512Ki, 100M) from least to most.
func sizeFlag(flag, value string, least, most int64) (int64, error) {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not a size: give bytes or a quantity such as 512Ki, 2Mi, 1Gi", flag, value)
	}
	n, exact := q.AsInt64()
	if !exact || n < least || n > most {
		return 0, fmt.Errorf("%s %q: give a whole number of bytes from %s to %s, such as 2Mi", flag, value, byteSize(least), byteSize(most))
	}
	return n, nil
}

// validateOutput refuses an --output that names a folder, or stdout: the archive is one file,
// written whole before it takes its name.
func (o *bugReportOptions) validateOutput() error {
	switch o.output {
	case "":
		return nil
	case "-":
		return fmt.Errorf("--output -: the archive is not written to stdout (a gzipped tar on a terminal); name a file, e.g. --output %s", defaultArchiveName(o.now()))
	}
	if st, err := os.Stat(o.output); err == nil && st.IsDir() {
		return fmt.Errorf("--output %s is a folder: name the archive's file, e.g. --output %s", o.output,
			filepath.Join(o.output, defaultArchiveName(o.now())))
	}
	return nil
}

func defaultArchiveName(t time.Time) string {
	return archiveRoot(t) + ".tar.gz"
}

// archiveRoot is the archive's one top folder: unpacked, it lands in a folder of its own.
func archiveRoot(t time.Time) string {
	return "kube-fstack-bug-report-" + t.UTC().Format("20060102T150405Z")
}

// connect builds the readers of the cluster from the kubeconfig, and returns them with the
// namespace -n or the context names.
func (o *bugReportOptions) connect() (*reportSources, string, error) {
	cfg, ns, err := o.restConfig()
	if err != nil {
		return nil, "", err
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, "", err
	}
	proxy, err := newProxyStatusReader(cfg)
	if err != nil {
		return nil, "", err
	}
	core, err := typedcorev1.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	src := &reportSources{client: c, status: proxy, config: proxy, logs: coreLogs{core},
		version: func(context.Context) (*version.Info, error) { return disc.ServerVersion() },
		secrets: []string{cfg.BearerToken, cfg.Password}}
	return src, ns, nil
}

// reportScope is which StackInstances were asked for.
type reportScope struct {
	namespace string // "": every namespace
	names     []string
	selector  string
}

func (s reportScope) String() string {
	var b strings.Builder
	switch {
	case len(s.names) > 0:
		fmt.Fprintf(&b, "StackInstance(s) %s of namespace %q", strings.Join(s.names, ", "), s.namespace)
	case s.namespace == "":
		b.WriteString("the StackInstances of every namespace")
	default:
		fmt.Fprintf(&b, "the StackInstances of namespace %q", s.namespace)
	}
	if s.selector != "" {
		fmt.Fprintf(&b, " matching -l %s", s.selector)
	}
	return b.String()
}

// report writes the archive and returns its path. No archive (the output cannot be written, the
// API server does not answer) is exit status 1; anything else that fails is an item of the
// index, and the report goes on.
func (o *bugReportOptions) report(ctx context.Context, src *reportSources, scope reportScope, stderr io.Writer) (string, error) {
	created := o.now().UTC().Truncate(time.Second)
	out := o.output
	if out == "" {
		out = defaultArchiveName(created)
	}
	a, err := createArchive(out, archiveRoot(created), o.limits, created)
	if err != nil {
		return "", fmt.Errorf("no archive written: %w", err)
	}
	defer a.abort()
	for _, s := range src.secrets {
		a.redact.learn(s)
	}
	a.index.Scope = scope.String()
	server, err := src.version(ctx)
	if err != nil {
		return "", fmt.Errorf("the API server did not answer, so nothing was collected and no archive written: %w", err)
	}
	c := &collector{src: src, a: a, scope: scope, limits: o.limits}
	c.collect(ctx, server)
	if ctx.Err() != nil {
		return "", fmt.Errorf("interrupted, so no archive written: %w", context.Cause(ctx))
	}
	if err := a.finish(); err != nil {
		return "", fmt.Errorf("no archive written: %w", err)
	}
	summarize(stderr, out, &a.index)
	return out, nil
}

// maxListed is how many missing items the summary names on stderr; README.md lists them all.
const maxListed = 10

// summarize says on stderr what was collected and, one line each, what was not.
func summarize(stderr io.Writer, out string, ix *BugReportIndex) {
	for i, m := range ix.Missing {
		if i == maxListed {
			fmt.Fprintf(stderr, "warning: and %d more not collected\n", len(ix.Missing)-maxListed)
			break
		}
		fmt.Fprintf(stderr, "warning: not collected: %s: %s\n", safe(m.What), safe(m.Reason))
	}
	var bytes int64
	for _, f := range ix.Files {
		bytes += f.Bytes
	}
	items := "items"
	if len(ix.Missing) == 1 {
		items = "item"
	}
	fmt.Fprintf(stderr, "bug-report: %d files (%s) written to %s; %d %s could not be collected (README.md in the archive lists them with the reason)\n",
		len(ix.Files)+2, humanBytes(bytes), safe(out), len(ix.Missing), items)
}

// humanBytes is n for a person: 12.3 MiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// errNotRunning says why a pod's supervisor was not asked.
var errNotRunning = errors.New("only a running pod's supervisor answers")

// reportSources are what bug-report reads the cluster through; tests give fakes.
type reportSources struct {
	client  client.Client
	status  podStatusReader
	config  podConfigReader
	logs    podLogReader
	version func(context.Context) (*version.Info, error)
	// secrets are the kubeconfig's credentials: never written, they are scrubbed from every file
	// all the same (an error message could quote one).
	secrets []string
}
