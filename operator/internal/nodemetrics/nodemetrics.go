// Package nodemetrics exports the node agents' check results (the report annotation each agent
// publishes on its Node) as metrics, so an alert can say which node lost what its F-Stack pods
// need. The operator already holds what that takes in its caches: the Nodes' metadata, the
// StackInstances and the trimmed pods that name them.
package nodemetrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Bounds on what one Node's annotation may add to a scrape: the agent writes it, but anyone
// allowed to patch Nodes can, and a scrape over the PodMonitor's sample limit fails whole.
const (
	maxChecksPerNode = 64
	maxNameLen       = 63
)

// The Nodes are read as metadata only: the annotation is all the collector needs, and a
// metadata informer keeps no Node status in the operator's memory.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// nodeList is the metadata list the collector reads; Register makes the cache watch it.
func nodeList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	return l
}

// Collector reads the reports at scrape time from the manager's cache.
type Collector struct {
	Reader  client.Reader
	Timeout time.Duration

	check *prometheus.Desc
	read  *prometheus.Desc
}

// New is a collector over reader (the manager's cache).
func New(reader client.Reader) *Collector {
	return &Collector{Reader: reader, Timeout: 5 * time.Second,
		check: prometheus.NewDesc("kubefstack_node_check_failed",
			"1 if the node agent's check failed on the node (status fail), 0 if it passed or warned; needed is true when an F-Stack pod bound to the node has a StackInstance that needs the label the check decides.",
			[]string{"node", "check", "needed"}, nil),
		read: prometheus.NewDesc("kubefstack_node_reports_read_up",
			"1 if the operator could read the Nodes, StackInstances and pods this scrape.", nil, nil),
	}
}

// Describe sends the descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.check
	ch <- c.read
}

// Collect emits a series per check of every Node that has a report.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	results, err := c.Results(ctx)
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.read, prometheus.GaugeValue, up)
	for _, r := range results {
		v := 0.0
		if r.Failed {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.check, prometheus.GaugeValue, v, r.Node, r.Check, boolString(r.Needed))
	}
}

// Result is one check of one node.
type Result struct {
	Node, Check    string
	Failed, Needed bool
}

// Results reads every Node's report and judges each check.
func (c *Collector) Results(ctx context.Context) ([]Result, error) {
	needs, err := c.needsByNode(ctx)
	if err != nil {
		return nil, err
	}
	nodes := nodeList()
	if err := c.Reader.List(ctx, nodes); err != nil {
		return nil, err
	}
	var out []Result
	for _, n := range nodes.Items {
		raw, ok := n.Annotations[fsv1.NodeReportAnnotation]
		if !ok {
			continue
		}
		report, err := nodecheck.ParseReport(raw)
		if err != nil {
			continue // not the agent's writing; the agent replaces it next period
		}
		out = append(out, judge(n.Name, report, needs[n.Name])...)
	}
	return out, nil
}

// judge turns one node's report into results; a check name seen twice counts once (a series
// must be unique), and names beyond the bounds are dropped.
func judge(node string, r *nodecheck.Report, needed map[string]bool) []Result {
	var out []Result
	seen := map[string]bool{}
	for _, chk := range r.Checks {
		if len(out) == maxChecksPerNode {
			break
		}
		if chk.Name == "" || len(chk.Name) > maxNameLen || seen[chk.Name] {
			continue
		}
		seen[chk.Name] = true
		out = append(out, Result{Node: node, Check: chk.Name, Failed: chk.Status == nodecheck.Fail,
			Needed: chk.Label != "" && needed[chk.Label]})
	}
	return out
}

// needsByNode is, for every node running a pod bound to a StackInstance, the node labels those
// stacks need (render.Spec.NodeRequirements, which the injector puts in the pods' node affinity).
// Only stacks with such a pod are prepared, each once; an invalid stack adds nothing: its pods are
// refused, none runs.
func (c *Collector) needsByNode(ctx context.Context) (map[string]map[string]bool, error) {
	pods := &corev1.PodList{}
	if err := c.Reader.List(ctx, pods, client.HasLabels{fsv1.StackLabel}); err != nil {
		return nil, err
	}
	nodesOf := map[client.ObjectKey][]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := client.ObjectKey{Namespace: p.Namespace, Name: p.Labels[fsv1.StackLabel]}
		nodesOf[key] = append(nodesOf[key], p.Spec.NodeName)
	}
	out := map[string]map[string]bool{}
	for key, nodes := range nodesOf {
		stack := &fsv1.StackInstance{}
		if err := c.Reader.Get(ctx, key, stack); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		checked, errs := render.Prepare(&stack.Spec)
		if len(errs) > 0 {
			continue
		}
		for _, req := range checked.NodeRequirements() {
			for _, n := range nodes {
				if out[n] == nil {
					out[n] = map[string]bool{}
				}
				out[n][req.Key] = true
			}
		}
	}
	return out, nil
}

// Register makes c watch the Nodes' metadata (started with the manager's other informers) and
// adds the collector to reg; a second manager in one process (tests) keeps the first's.
func Register(ctx context.Context, c cache.Cache, reg prometheus.Registerer) error {
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if _, err := c.GetInformer(ctx, node, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watch the Nodes' metadata: %w", err)
	}
	err := reg.Register(New(c))
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
