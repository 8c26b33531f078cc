// Package logging builds the structured logger every kube-fstack binary logs through (the
// operator, the CNI plugin, the dataplane's supervisor and the apps' launcher), so their lines
// share one format and one set of keys. The format is text by default (key=value, as
// Kubernetes components' structured logs) or JSON; both carry time, level, msg and component
// first. docs/logging.md is the user's page for it.
package logging

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// The keys every binary uses for the same thing; docs/logging.md has them as a table.
const (
	// KeyComponent names the binary: one of the Component* values.
	KeyComponent = "component"
	// KeyNamespace and KeyPod name the pod a line is about.
	KeyNamespace = "namespace"
	KeyPod       = "pod"
	// KeyStack names the pod's StackInstance.
	KeyStack = "stack"
	// KeyContainer is a container's name in the pod; KeyContainerID is the runtime's id of the
	// pod's sandbox, as the CNI plugin is given it.
	KeyContainer   = "container"
	KeyContainerID = "containerID"
	// KeyProcess is the F-Stack process index (proc_id, 0 the primary).
	KeyProcess = "process"
	// KeyPID is an operating-system process id.
	KeyPID = "pid"
	// KeyPort is a stack's network port: its OVS port (CNI plugin) or its DPDK port id.
	KeyPort = "port"
	// KeyIfname is the pod's interface name of a network attachment (net1).
	KeyIfname = "ifname"
	// KeyGeneration is the dataplane generation: its starts in this pod.
	KeyGeneration = "generation"
	// KeyProgram names a program the supervisor runs that is not one F-Stack process (the probe
	// agent, F-Stack's Nginx master).
	KeyProgram = "program"
	// KeyStream marks a line a child process wrote, relayed as it was: its value says which
	// output ("output": stdout and stderr, in order).
	KeyStream = "stream"
	// KeyNode is a Kubernetes node's name.
	KeyNode = "node"
	// KeyErr is an error.
	KeyErr = "err"
)

// The components, as KeyComponent says them.
const (
	ComponentOperator   = "fstack-operator"
	ComponentCNI        = "fstack-cni"
	ComponentSupervisor = "fstack-supervisor"
	ComponentLauncher   = "fstack-launcher"
	// The node DaemonSet's image: the installer, and its node-agent and node-cleanup commands.
	ComponentInstaller   = "fstack-cni-installer"
	ComponentNodeAgent   = "fstack-node-agent"
	ComponentNodeCleanup = "fstack-node-cleanup"
)

// The formats.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// The flags and the environment variables every binary that takes flags accepts; a flag
// given wins over its variable. The injection passes the variables to the dataplane and app
// containers, and the CNI plugin reads the same two settings from its network config
// (logFormat, logLevel).
const (
	FlagFormat = "log-format"
	FlagLevel  = "log-level"
	EnvFormat  = "KUBE_FSTACK_LOG_FORMAT"
	EnvLevel   = "KUBE_FSTACK_LOG_LEVEL"
)

// Options choose the format and the level.
type Options struct {
	// Format is FormatText (the default when empty) or FormatJSON.
	Format string
	// Level is debug, info (the default when empty), warn or error.
	Level string
}

// FromEnv reads the options from EnvFormat and EnvLevel.
func FromEnv(lookup func(string) (string, bool)) Options {
	var o Options
	if v, ok := lookup(EnvFormat); ok {
		o.Format = v
	}
	if v, ok := lookup(EnvLevel); ok {
		o.Level = v
	}
	return o
}

// BindFlags registers --log-format and --log-level on fs, their defaults taken from the
// environment (os.LookupEnv), so a flag given wins over its variable.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	env := FromEnv(os.LookupEnv)
	fs.StringVar(&o.Format, FlagFormat, env.Format, "log format: "+FormatText+" (key=value) or "+FormatJSON+" (default "+FormatText+"; env "+EnvFormat+")")
	fs.StringVar(&o.Level, FlagLevel, env.Level, "log level: debug, info, warn or error (default info; env "+EnvLevel+")")
}

// Check says what is wrong with the options, naming the flag and what it takes.
func (o Options) Check() error {
	var errs []error
	switch o.Format {
	case "", FormatText, FormatJSON:
	default:
		errs = append(errs, fmt.Errorf("--%s (%s) %q: want %s or %s", FlagFormat, EnvFormat, o.Format, FormatText, FormatJSON))
	}
	if _, err := ParseLevel(o.Level); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseLevel reads a level name; empty is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--%s (%s) %q: want debug, info, warn or error", FlagLevel, EnvLevel, s)
}

// NewHandler is the handler of the options, writing to w; time is UTC.
func NewHandler(w io.Writer, o Options) (slog.Handler, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	level, _ := ParseLevel(o.Level)
	ho := &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr}
	if o.Format == FormatJSON {
		return slog.NewJSONHandler(w, ho), nil
	}
	return slog.NewTextHandler(w, ho), nil
}

// New is the logger of component, writing to w: every line carries component=<component>.
func New(w io.Writer, component string, o Options) (*slog.Logger, error) {
	h, err := NewHandler(w, o)
	if err != nil {
		return nil, err
	}
	return slog.New(h).With(KeyComponent, component), nil
}

// Discard is a logger that writes nothing, for callers given none.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// replaceAttr writes time in UTC, and each level as one of the four names --log-level takes:
// logr's V(n) arrives as slog level -n, which slog would name DEBUG+3, DEBUG+2...
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	case slog.LevelKey:
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(levelName(l))
		}
	}
	return a
}

func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	default:
		return "ERROR"
	}
}
