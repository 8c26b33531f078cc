// Package nodeagent is the loop of the CNI DaemonSet's node-agent container: every period it runs
// the node checks (internal/nodecheck) and publishes their labels and report on its own Node,
// changing nothing when nothing changed.
package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Agent checks one node and publishes the result on its Node object.
type Agent struct {
	Client kubernetes.Interface
	// Node is the agent's own node (the downward API's spec.nodeName).
	Node   string
	Period time.Duration
	// Checks says where the node's files are; Allocatable is filled from the Node each time.
	Checks nodecheck.Config
	Log    *slog.Logger
	// Checkpoint is the kubelet's CPU manager checkpoint as mounted; "" skips the replaced check.
	Checkpoint string
	// CheckpointMinUptime is how long the agent runs before a replaced checkpoint ends it. The
	// kubelet rewrites the file on every exclusive-CPU allocation, and each exit is a container
	// restart: an agent that has run longer than twice the kubelet's maximum restart back-off
	// (5m) restarts after the initial 10s back-off instead of crash-looping on a busy node. What
	// is read changes only with a kubelet restart: the policy name, and the union of the shared
	// pool and the assignments (every CPU the kubelet manages); only the PMD check's naming of a
	// CPU's current holder may be as old as the agent.
	CheckpointMinUptime time.Duration
	// FirstRoundAfter, when set, is awaited (up to FirstRoundWait) before the first round, so a
	// new pod does not publish a failed check, and drop a label for a period, only because the
	// installer container has not written its first OVS answers yet.
	FirstRoundAfter func() bool
	FirstRoundWait  time.Duration
}

// Run checks at once, then every Period until ctx ends. A failed round is logged and retried at
// the next period: the API server or OVS may be restarting.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.Period)
	defer t.Stop()
	checkpoint := a.openCheckpoint()
	if checkpoint != nil {
		defer checkpoint.Close()
	}
	a.awaitFirstRound(ctx)
	start, told := time.Now(), false
	for {
		if checkpoint != nil {
			gone, err := unlinked(checkpoint)
			switch {
			case gone && time.Since(start) >= a.CheckpointMinUptime:
				a.Log.Info("exiting", logging.KeyErr, ErrCheckpointReplaced)
				return ErrCheckpointReplaced
			case gone && !told:
				told = true
				a.Log.Info(fmt.Sprintf("the kubelet replaced its CPU manager checkpoint; restarting to read the new one once this agent has run %s (not sooner: the kubelet would back off its restarts)", a.CheckpointMinUptime))
			case err != nil:
				a.Log.Error("CPU manager checkpoint", logging.KeyErr, err)
			}
		}
		if err := a.Once(ctx); err != nil {
			a.Log.Error("check round", logging.KeyErr, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *Agent) awaitFirstRound(ctx context.Context) {
	if a.FirstRoundAfter == nil {
		return
	}
	deadline := time.Now().Add(a.FirstRoundWait)
	for !a.FirstRoundAfter() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// openCheckpoint keeps the checkpoint open, so its link count can be read each round; the file
// mount pins the same inode, so what this sees is what the checks read.
func (a *Agent) openCheckpoint() *os.File {
	if a.Checkpoint == "" {
		return nil
	}
	f, err := os.OpenFile(a.Checkpoint, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		a.Log.Warn("cannot watch the CPU manager checkpoint for replacement", logging.KeyErr, err)
		return nil
	}
	return f
}

// Once runs the checks and patches the Node when its labels or report differ.
func (a *Agent) Once(ctx context.Context) error {
	nodes := a.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, a.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", a.Node, err)
	}
	if err := InstallSeccomp(a.Checks.SeccompDir, a.Checks.SeccompProfile); err != nil {
		// The check below fails and says so in the report; the next period tries again.
		a.Log.Error("seccomp profile", logging.KeyErr, err)
	}
	cfg := a.Checks
	cfg.Allocatable, cfg.Capacity = node.Status.Allocatable, node.Status.Capacity
	report := nodecheck.Run(ctx, &cfg)
	patch := Patch(node, report)
	if patch == nil {
		return nil
	}
	if _, err := nodes.Patch(ctx, a.Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kube-fstack-node-agent"}); err != nil {
		return fmt.Errorf("patch node %s: %w", a.Node, err)
	}
	a.Log.Info("published", "report", summary(report))
	return nil
}

// InstallSeccomp writes the dataplane's seccomp profile into dir unless it is already there as
// profile: the kubelet reads it at each container start, so it is replaced whole (rename), never
// rewritten in place. An empty dir installs nothing.
func InstallSeccomp(dir string, profile []byte) error {
	if dir == "" || len(profile) == 0 {
		return nil
	}
	d, err := fsutil.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("seccomp directory: %w", err)
	}
	defer d.Close()
	if got, err := d.ReadFile(podcontract.SeccompProfileFile, int64(len(profile))+1); err == nil && bytes.Equal(got, profile) {
		return nil
	}
	if err := d.WriteAtomic(podcontract.SeccompProfileFile, profile, 0o644); err != nil {
		return fmt.Errorf("install seccomp profile %s: %w", d.Join(podcontract.SeccompProfileFile), err)
	}
	return nil
}

// Patch is the JSON merge patch that makes node carry report's labels and report, touching only
// keys under fsv1.NodeLabelPrefix (stale ones are removed); nil when node already does.
func Patch(node *corev1.Node, report *nodecheck.Report) []byte {
	labels := map[string]any{}
	for k := range node.Labels {
		if _, keep := report.Labels[k]; strings.HasPrefix(k, fsv1.NodeLabelPrefix) && !keep {
			labels[k] = nil
		}
	}
	for k, v := range report.Labels {
		if node.Labels[k] != v {
			labels[k] = v
		}
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if raw := report.Marshal(); node.Annotations[fsv1.NodeReportAnnotation] != raw {
		meta["annotations"] = map[string]any{fsv1.NodeReportAnnotation: raw}
	}
	if len(meta) == 0 {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"metadata": meta}) // maps of strings: cannot fail
	return out
}

// summary is one log line: the labels and each check that did not pass.
func summary(r *nodecheck.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "labels %v", r.Labels)
	for _, c := range r.Failed() {
		fmt.Fprintf(&b, "; %s %s: %s", c.Name, c.Status, c.Detail)
	}
	return b.String()
}
