package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// ErrCheckpointReplaced ends the agent when the kubelet has replaced its CPU manager checkpoint:
// the agent's hostPath file mount pins the inode it started with, which then has no link left,
// and only a new container sees the new file.
var ErrCheckpointReplaced = errors.New("the kubelet replaced its CPU manager checkpoint (the mounted file has no links left): exiting so the container restarts with the new one")

// unlinked says whether f's file has been removed or replaced (its link count is 0).
func unlinked(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false, fmt.Errorf("%s: no link count", f.Name())
	}
	return sys.Nlink == 0, nil
}

// Unpublish is the JSON merge patch that removes every node.kubefstack.io/ label and the report
// from node; nil when it carries none.
func Unpublish(node *corev1.Node) []byte {
	labels := map[string]any{}
	for k := range node.Labels {
		if strings.HasPrefix(k, fsv1.NodeLabelPrefix) {
			labels[k] = nil
		}
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if _, ok := node.Annotations[fsv1.NodeReportAnnotation]; ok {
		meta["annotations"] = map[string]any{fsv1.NodeReportAnnotation: nil}
	}
	if len(meta) == 0 {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"metadata": meta}) // maps of strings: cannot fail
	return out
}

// Cleanup removes what the agents published, from every Node, once no agent pod is left to
// publish again: the chart runs it after `helm uninstall` has deleted the DaemonSet.
type Cleanup struct {
	Client kubernetes.Interface
	// Namespace and Selector find the agents' pods (the CNI DaemonSet's).
	Namespace, Selector string
	// Poll is how often to look again for agent pods still terminating.
	Poll time.Duration
	Log  *slog.Logger
}

// Run unlabels, waits until no agent pod is left (one still stopping may publish a last
// round), and unlabels again.
func (c *Cleanup) Run(ctx context.Context) error {
	if err := c.unlabel(ctx); err != nil {
		return err
	}
	for {
		pods, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: c.Selector})
		if err != nil {
			return fmt.Errorf("list node agent pods: %w", err)
		}
		if len(pods.Items) == 0 {
			return c.unlabel(ctx)
		}
		c.Log.Info("node agent pods still stopping", "pods", len(pods.Items))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.Poll):
		}
	}
}

func (c *Cleanup) unlabel(ctx context.Context) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	var errs []error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := Unpublish(n)
		if patch == nil {
			continue
		}
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kube-fstack-node-cleanup"}); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		c.Log.Info("removed kube-fstack's labels and report", logging.KeyNode, n.Name)
	}
	return errors.Join(errs...)
}
