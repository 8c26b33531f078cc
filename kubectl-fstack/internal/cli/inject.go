package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
)

type injectOptions struct {
	files                                   fileFlags
	stackFile, stackName, image, pullPolicy string
	nodeAffinity                            bool
}

func newInjectCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &injectOptions{}
	cmd := &cobra.Command{
		Use:   "inject -f workload.yaml --stack stack.yaml [--stack-name NAME] [--image IMAGE]",
		Short: "Inject the F-Stack dataplane into Pods, Deployments, StatefulSets, DaemonSets and Jobs offline",
		Long: `Apply the operator's pod injection to manifests, without a cluster.

Every Pod and pod template (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) gets
the dataplane sidecar, the shared volumes and the shim exactly as the webhook would add them;
pod templates that do not name the stack get its label. Other documents pass through unchanged.
A workload that cannot run the stack is reported with its field paths on stderr (exit 1).

A stack whose port takes its address from a pool gives each pod its own address, which only the
webhook claims. Offline the output is a preview: every pod serves the pool's first address, a
placeholder that a comment above each such document and a warning on stderr name. Do not apply
that output to a cluster that runs kube-fstack (its webhook claims the placeholder for the first
pod that arrives with it and refuses every other replica): apply the workload as written, and
the webhook injects each pod with an address of its own.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error { return o.run(stdout, stderr) },
	}
	f := cmd.Flags()
	o.files.add(f, "manifests to inject (YAML or JSON, several documents; repeatable; a directory's .json, .yaml and .yml files; - for stdin)")
	f.StringVar(&o.stackFile, "stack", "", "the StackInstance manifest")
	f.StringVar(&o.stackName, "stack-name", "", "which StackInstance of a multi-document --stack file")
	f.StringVar(&o.image, "image", DefaultDataplaneImage(), "dataplane image when the StackInstance names none (default: this plugin's release's)")
	f.StringVar(&o.pullPolicy, "pull-policy", "IfNotPresent", "imagePullPolicy of the dataplane container")
	f.BoolVar(&o.nodeAffinity, "node-affinity", true, "require the node agent's node.kubefstack.io labels the stack needs, as the operator does (false for a cluster without the node agent)")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagRequired("stack")
	return cmd
}

func (o *injectOptions) run(stdout, stderr io.Writer) error {
	si, err := o.loadStack(stderr)
	if err != nil {
		return err
	}
	cfg := inject.DefaultConfig()
	cfg.Image, cfg.ImagePullPolicy = o.image, corev1.PullPolicy(o.pullPolicy)
	cfg.NodeAffinity = o.nodeAffinity
	// A manifest's pod template is every replica's, and may be committed: the webhook gives each
	// pod a status token of its own when it is created.
	cfg.OmitStatusToken = true
	prep, err := inject.Prepare(si, cfg)
	if err != nil {
		return reportReject(stderr, "", err)
	}
	inj := newInjector(prep, si)
	files, err := o.files.read()
	if err != nil {
		return err
	}
	var docs [][]byte
	for _, in := range files {
		d, err := splitDocuments(in.data)
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		docs = append(docs, d...)
	}
	var out [][]byte
	var failed bool
	for _, doc := range docs {
		injected, err := inj.document(doc)
		if err != nil {
			failed = true
			if err := reportReject(stderr, describe(doc), err); !errors.Is(err, errReported) {
				fmt.Fprintln(stderr, "error:", safe(err.Error()))
			}
			continue
		}
		out = append(out, injected)
	}
	if failed {
		return errReported
	}
	inj.warn(stderr)
	_, err = stdout.Write(bytes.Join(out, []byte("---\n")))
	return err
}

// loadStack reads the chosen StackInstance of --stack as the API server would store it (admit).
func (o *injectOptions) loadStack(stderr io.Writer) (*fsv1.StackInstance, error) {
	files, err := (&fileFlags{filenames: []string{o.stackFile}}).read()
	if err != nil {
		return nil, fmt.Errorf("--stack: %w", err)
	}
	return loadStack(stderr, files, o.stackName, "--stack-name")
}

// splitDocuments are data's documents (manifest.Split) but those of only comments or blank
// lines, which hold nothing to inject or to write back.
func splitDocuments(data []byte) ([][]byte, error) {
	all, err := manifest.Split(data)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, doc := range all {
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

// templatePaths says where each workload kind keeps its pod template; a Pod is its own.
var templatePaths = map[string][]string{
	"Pod":         {},
	"Deployment":  {"spec", "template"},
	"StatefulSet": {"spec", "template"},
	"DaemonSet":   {"spec", "template"},
	"ReplicaSet":  {"spec", "template"},
	"Job":         {"spec", "template"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template"},
}

// document injects the pod templates of one document (injectDocument), and puts the
// placeholder's comment above it when a pod of it got one.
func (inj *injector) document(doc []byte) ([]byte, error) {
	before := inj.previews
	out, err := injectDocument(doc, inj)
	if err != nil || inj.previews == before {
		return out, err
	}
	return append([]byte(inj.comment()), out...), nil
}

// injectDocument injects the pod template of one document, leaving every other field as
// written; documents of other kinds come back unchanged, and a List has each item injected.
func injectDocument(doc []byte, inj *injector) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	kind, _ := obj["kind"].(string)
	if _, ok := templatePaths[kind]; !ok && kind != "List" {
		return doc, nil
	}
	if kind == "List" {
		// kubectl get -o yaml writes a List; kubectl apply applies its items, so each is injected.
		items, _ := obj["items"].([]any)
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("items[%d] is not an object", i)
			}
			if err := injectObject(item, inj); err != nil {
				var re *inject.RejectError
				if errors.As(err, &re) {
					prefixPaths(re, fmt.Sprintf("items[%d].", i))
					return nil, err
				}
				return nil, fmt.Errorf("items[%d] (%v %v): %w", i, item["kind"], objectName(item), err)
			}
		}
		return yaml.Marshal(obj)
	}
	if err := injectObject(obj, inj); err != nil {
		return nil, err
	}
	return yaml.Marshal(obj)
}

func objectName(obj map[string]any) any {
	meta, _ := obj["metadata"].(map[string]any)
	return meta["name"]
}

// injectObject injects the pod template of one workload object in place; other kinds are left.
// It refuses what the webhook would not inject: a workload in another namespace than the
// StackInstance (the webhook looks the stack up in the pod's namespace), and a pod template
// whose stack label names another stack (replacing it would bind the pod to a stack its author
// did not choose).
func injectObject(obj map[string]any, inj *injector) error {
	si := inj.si
	kind, _ := obj["kind"].(string)
	path, ok := templatePaths[kind]
	if !ok {
		return nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); ns != "" && si.Namespace != "" && ns != si.Namespace {
		return fmt.Errorf("metadata.namespace is %q but StackInstance %s is in %q: the webhook binds a pod only to a StackInstance of its own namespace", ns, si.Name, si.Namespace)
	}
	tmpl, err := lookup(obj, path)
	if err != nil {
		return err
	}
	pod, err := toPod(tmpl)
	if err != nil {
		if len(path) == 0 {
			return err // the paths in err are the Pod's own
		}
		return fmt.Errorf("in the pod template %s: %w", strings.Join(path, "."), err)
	}
	if own := pod.Labels[fsv1.StackLabel]; own != "" && own != si.Name {
		return fmt.Errorf("%s labels %s=%s, but --stack is StackInstance %s: remove the label or choose that stack",
			strings.Join(append(append([]string{}, path...), "metadata", "labels"), "."), fsv1.StackLabel, own, si.Name)
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[fsv1.StackLabel] = si.Name
	injected, _, err := inj.inject(pod)
	if err != nil {
		var re *inject.RejectError
		if errors.As(err, &re) && len(path) > 0 {
			prefixPaths(re, strings.Join(path, ".")+".")
		}
		return err
	}
	return fromPod(injected, tmpl)
}

func lookup(obj map[string]any, path []string) (map[string]any, error) {
	cur := obj
	for i, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is missing", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return cur, nil
}

// toPod reads the metadata and spec of a pod or pod template.
func toPod(tmpl map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(map[string]any{"metadata": tmpl["metadata"], "spec": tmpl["spec"]})
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := manifest.Strict(raw, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// fromPod writes the injected metadata and spec back into the template.
func fromPod(pod *corev1.Pod, tmpl map[string]any) error {
	raw, err := json.Marshal(struct {
		Metadata any `json:"metadata"`
		Spec     any `json:"spec"`
	}{podMeta(pod), pod.Spec})
	if err != nil {
		return err
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		return err
	}
	tmpl["metadata"], tmpl["spec"] = back["metadata"], back["spec"]
	return nil
}

// podMeta drops the zero creationTimestamp a typed ObjectMeta would print.
func podMeta(pod *corev1.Pod) map[string]any {
	raw, _ := json.Marshal(pod.ObjectMeta)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m["creationTimestamp"] == nil {
		delete(m, "creationTimestamp")
	}
	return m
}

func prefixPaths(re *inject.RejectError, prefix string) {
	for _, e := range re.Errs {
		e.Field = prefix + e.Field
	}
}

func describe(doc []byte) string {
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &meta)
	return fmt.Sprintf("%s %s", meta.Kind, meta.Metadata.Name)
}

// reportReject prints every field problem of a refusal on its own line.
func reportReject(stderr io.Writer, what string, err error) error {
	var re *inject.RejectError
	if !errors.As(err, &re) {
		if what != "" {
			return fmt.Errorf("%s: %w", what, err)
		}
		return err
	}
	if what != "" {
		fmt.Fprintf(stderr, "%s cannot run StackInstance %q:\n", what, re.Stack)
	} else {
		fmt.Fprintf(stderr, "StackInstance %q cannot be injected:\n", re.Stack)
	}
	for _, e := range re.Errs {
		fmt.Fprintf(stderr, "  %s\n", e.Error())
	}
	return errReported
}
