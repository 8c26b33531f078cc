package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// collector reads the cluster in two passes: first the objects (the StackInstances, their pods,
// the operator's Deployments and pods), so that every secret value is known before the first
// file is written; then it writes, the logs last, as the largest and the first to go when the
// archive is full.
type collector struct {
	src    *reportSources
	a      *bugArchive
	scope  reportScope
	limits BugReportLimits

	stacks    []stackRead
	operators []operatorRead
	statuses  podStatuses
	configs   podConfigs
}

// stackRead is a StackInstance, its bound pods and its folder in the archive.
type stackRead struct {
	si   fsv1.StackInstance
	pods []corev1.Pod
	dir  string
}

// operatorRead is an operator Deployment, its pods and its folder in the archive.
type operatorRead struct {
	dep  appsv1.Deployment
	pods []corev1.Pod
	dir  string
}

func (c *collector) collect(ctx context.Context, server *version.Info) {
	c.readStacks(ctx)
	deps, depsErr := c.readOperators(ctx)
	pods := c.learnSecrets()
	c.statuses = readStatuses(ctx, c.src.status, pods)
	c.configs = readConfigs(ctx, c.src.config, pods)
	c.writeVersions(server, deps, depsErr)
	c.writeDoctor(ctx)
	c.writeCluster(ctx)
	for i := range c.stacks {
		c.writeStack(ctx, &c.stacks[i])
	}
	for i := range c.operators {
		c.writeOperator(ctx, &c.operators[i])
	}
	c.writeImages()
	c.writeLogs(ctx)
}

// readStacks reads the StackInstances of the scope and the pods bound to each.
func (c *collector) readStacks(ctx context.Context) {
	var stacks []fsv1.StackInstance
	if len(c.scope.names) > 0 {
		for _, name := range slices.Compact(slices.Sorted(slices.Values(c.scope.names))) {
			got, err := listStacks(ctx, c.src.client, c.scope.namespace, name, "")
			if err != nil {
				c.a.fail(archivePath("stacks", c.scope.namespace, name), fmt.Sprintf("StackInstance %s/%s", c.scope.namespace, name), err)
				continue
			}
			stacks = append(stacks, got...)
		}
	} else {
		var err error
		if stacks, err = listStacks(ctx, c.src.client, c.scope.namespace, "", c.scope.selector); err != nil {
			c.a.fail("stacks", "the StackInstances of "+c.scope.String(), err)
		} else if len(stacks) == 0 {
			c.a.fail("stacks", "the StackInstances of "+c.scope.String(), errors.New("there is none"))
		}
	}
	for _, si := range stacks {
		s := stackRead{si: si, dir: archivePath("stacks", si.Namespace, si.Name)}
		pods := &corev1.PodList{}
		if err := c.src.client.List(ctx, pods, client.InNamespace(si.Namespace), client.MatchingLabels{fsv1.StackLabel: si.Name}); err != nil {
			c.a.fail(s.dir+"/pods", fmt.Sprintf("the pods of StackInstance %s/%s", si.Namespace, si.Name), err)
		}
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
		s.pods = pods.Items
		c.stacks = append(c.stacks, s)
	}
}

// readOperators finds the operator's Deployments as version does, by the chart's labels, in any
// namespace, and reads their pods.
func (c *collector) readOperators(ctx context.Context) ([]appsv1.Deployment, error) {
	const what = "the operator's Deployments (labelled app.kubernetes.io/part-of=kube-fstack, app.kubernetes.io/component=operator)"
	list := &appsv1.DeploymentList{}
	if err := c.src.client.List(ctx, list, operatorSelector); err != nil {
		err = fmt.Errorf("list them in every namespace: %w", err)
		c.a.fail("operator", what, err)
		return nil, err
	}
	if len(list.Items) == 0 {
		c.a.fail("operator", what, errors.New("none in any namespace (kube-fstack not installed with its chart, or its labels changed)"))
	}
	for _, d := range list.Items {
		o := operatorRead{dep: d, dir: archivePath("operator", d.Namespace, d.Name)}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		pods := &corev1.PodList{}
		if err == nil {
			err = c.src.client.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel})
		}
		if err != nil {
			c.a.fail(o.dir+"/pods", fmt.Sprintf("the pods of Deployment %s/%s", d.Namespace, d.Name), err)
		}
		o.pods = pods.Items
		c.operators = append(c.operators, o)
	}
	return list.Items, nil
}

// learnSecrets has the redactor learn every secret value of the pods and Deployments read (on
// copies: the pods keep their status token, which reading their supervisor sends), and returns
// the stacks' pods.
func (c *collector) learnSecrets() []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range c.stacks {
		for j := range c.stacks[i].pods {
			p := &c.stacks[i].pods[j]
			c.a.redact.pod(p.DeepCopy())
			pods = append(pods, p)
		}
	}
	for i := range c.operators {
		c.a.redact.deployment(c.operators[i].dep.DeepCopy())
		for j := range c.operators[i].pods {
			c.a.redact.pod(c.operators[i].pods[j].DeepCopy())
		}
	}
	return pods
}

// writeVersions writes version.json, what `kubectl fstack version -o json` prints, and the API
// server's version.
func (c *collector) writeVersions(server *version.Info, deps []appsv1.Deployment, depsErr error) {
	v := &VersionInfo{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "VersionInfo"},
		Plugin: Version, FStackCommit: PinnedFStackCommit, Operators: operatorVersions(deps)}
	if depsErr != nil {
		v.ClusterError = depsErr.Error()
	}
	c.writeJSON("version.json", "the plugin's version, its dataplane image's F-Stack commit, each operator's image and dataplane image (kubectl fstack version -o json)", v)
	c.writeJSON("cluster/server-version.json", "the API server's version", server)
}

// writeDoctor writes what `kubectl fstack doctor -o json` prints for the scope's namespace,
// with the /status answers already read.
func (c *collector) writeDoctor(ctx context.Context) {
	const name, what = "doctor.json", "kubectl fstack doctor -o json: every node's checks, the stacks that need them, the pods, the cluster setup"
	in, err := fetchDoctorInput(ctx, c.src.client, cachedStatuses{c.statuses, c.src.status}, c.scope.namespace, nil)
	if err != nil {
		c.a.fail(name, what, err)
		return
	}
	c.writeJSON(name, what, buildDoctorReport(in))
}

// writeCluster writes the DataNetworks, the nodes that matter (with their node agent's
// report) and the operator namespaces' AddressClaims.
func (c *collector) writeCluster(ctx context.Context) {
	dn := &fsv1.DataNetworkList{}
	if err := c.src.client.List(ctx, dn); err != nil {
		c.a.fail("cluster/datanetworks.yaml", "the DataNetworks", err)
	} else {
		c.writeList("cluster/datanetworks.yaml", "the DataNetworks", dn)
	}
	c.writeNodes(ctx)
	seen := map[string]bool{}
	for _, o := range c.operators {
		ns := o.dep.Namespace
		if seen[ns] {
			continue
		}
		seen[ns] = true
		name, what := archivePath("operator", ns)+"/addressclaims.yaml", fmt.Sprintf("the AddressClaims of the operator's namespace %s", ns)
		list := &fsv1.AddressClaimList{}
		if err := c.src.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			c.a.fail(name, what, err)
			continue
		}
		c.writeList(name, what, list)
	}
}

// writeNodes writes each node that runs a pod of the report or carries a node agent's report:
// the node (without its list of images) and the report, indented.
func (c *collector) writeNodes(ctx context.Context) {
	list := &corev1.NodeList{}
	if err := c.src.client.List(ctx, list); err != nil {
		c.a.fail("cluster/nodes", "the nodes and their node agent's reports", err)
		return
	}
	used := map[string]bool{}
	for _, s := range c.stacks {
		for _, p := range s.pods {
			used[p.Spec.NodeName] = true
		}
	}
	for i := range list.Items {
		n := &list.Items[i]
		report, hasReport := n.Annotations[fsv1.NodeReportAnnotation]
		if !hasReport && !used[n.Name] {
			continue
		}
		n.Status.Images = nil
		c.writeYAML(archivePath("cluster", "nodes", n.Name+".yaml"), "node "+n.Name, n)
		if hasReport {
			name := archivePath("cluster", "nodes", n.Name+".report.json")
			var indented bytes.Buffer
			if err := json.Indent(&indented, []byte(report), "", "  "); err != nil {
				c.a.add(name, fmt.Sprintf("node %s: its node agent's report, as published (not JSON: %v)", n.Name, err), []byte(report))
				continue
			}
			c.a.add(name, fmt.Sprintf("node %s: its node agent's report (the annotation %s)", n.Name, fsv1.NodeReportAnnotation), indented.Bytes())
		}
	}
}

// writeStack writes a StackInstance, its conditions, ConfigMap, events and status view, then
// each of its pods.
func (c *collector) writeStack(ctx context.Context, s *stackRead) {
	key := s.si.Namespace + "/" + s.si.Name
	si := s.si.DeepCopy()
	c.writeYAML(s.dir+"/stackinstance.yaml", "StackInstance "+key, si)
	c.a.add(s.dir+"/conditions.txt", "StackInstance "+key+": its status conditions", conditionsTable(s.si.Status.Conditions))
	cm := &corev1.ConfigMap{}
	cmName := s.si.Name + "-fstack"
	if err := c.src.client.Get(ctx, client.ObjectKey{Namespace: s.si.Namespace, Name: cmName}, cm); err != nil {
		c.a.fail(s.dir+"/configmap.yaml", fmt.Sprintf("StackInstance %s: its rendered preview, ConfigMap %s", key, cmName), err)
	} else {
		c.writeYAML(s.dir+"/configmap.yaml", fmt.Sprintf("StackInstance %s: its rendered preview, ConfigMap %s", key, cmName), cm)
	}
	c.writeEvents(ctx, s.dir+"/events.yaml", "StackInstance "+key+": its events", s.si.Namespace, s.si.UID)
	l := newStackStatusList()
	l.addStack(&s.si, append([]corev1.Pod(nil), s.pods...), c.statuses)
	if data, err := yamlOf(l); err != nil {
		c.a.fail(s.dir+"/status.yaml", "kubectl fstack status -o yaml "+key, err)
	} else {
		c.a.add(s.dir+"/status.yaml", "kubectl fstack status -o yaml "+key, data)
	}
	for i := range s.pods {
		p := &s.pods[i]
		dir := s.dir + "/" + archivePath("pods", p.Name)
		c.writePod(ctx, dir, p)
		c.writeSupervisor(dir, p)
	}
}

// writePod writes a pod, redacted, and its events.
func (c *collector) writePod(ctx context.Context, dir string, p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	cp := p.DeepCopy()
	c.a.redact.pod(cp)
	c.writeYAML(dir+"/pod.yaml", "pod "+key, cp)
	c.writeEvents(ctx, dir+"/events.yaml", "pod "+key+": its events", p.Namespace, p.UID)
}

// writeSupervisor writes what the pod's supervisor answered to /status and /config, or why it
// did not.
func (c *collector) writeSupervisor(dir string, p *corev1.Pod) {
	key := podKey{p.Namespace, p.Name}
	what := fmt.Sprintf("pod %s/%s: its supervisor's %s", p.Namespace, p.Name, podcontract.StatusPath)
	switch {
	case c.statuses.got[key] != nil:
		c.writeJSON(dir+"/supervisor-status.json", what, c.statuses.got[key])
	case c.statuses.errs[key] != nil:
		err := c.statuses.errs[key]
		var se *statusError
		if errors.As(err, &se) {
			err = fmt.Errorf("%w%s", err, statusHint(se.kind))
		}
		c.a.fail(dir+"/supervisor-status.json", what, err)
	default:
		c.a.fail(dir+"/supervisor-status.json", what, notRunning(p))
	}
	what = fmt.Sprintf("pod %s/%s: its supervisor's %s (config.ini, EAL argv, the shim's mode)", p.Namespace, p.Name, podcontract.ConfigPath)
	switch {
	case c.configs.got[key] != nil:
		c.writeJSON(dir+"/supervisor-config.json", what, c.configs.got[key])
	case c.configs.errs[key] != nil:
		c.a.fail(dir+"/supervisor-config.json", what, configError(p.Namespace, p.Name, c.configs.errs[key]))
	default:
		c.a.fail(dir+"/supervisor-config.json", what, notRunning(p))
	}
}

func notRunning(p *corev1.Pod) error {
	state := string(p.Status.Phase)
	if p.DeletionTimestamp != nil {
		state = "terminating"
	}
	return fmt.Errorf("the pod is %s: %w", orDash(state), errNotRunning)
}

// writeOperator writes an operator Deployment, redacted, and each of its pods.
func (c *collector) writeOperator(ctx context.Context, o *operatorRead) {
	d := o.dep.DeepCopy()
	c.a.redact.deployment(d)
	c.writeYAML(o.dir+"/deployment.yaml", fmt.Sprintf("the operator's Deployment %s/%s", d.Namespace, d.Name), d)
	for i := range o.pods {
		c.writePod(ctx, o.dir+"/"+archivePath("pods", o.pods[i].Name), &o.pods[i])
	}
}

// writeImages writes images.txt: every container of the pods collected, its image and the
// image's digest as the node pulled it.
func (c *collector) writeImages() {
	var rows [][]string
	add := func(p *corev1.Pod) {
		ids := map[string]string{}
		for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			ids[s.Name] = s.ImageID
		}
		for _, ct := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			rows = append(rows, []string{p.Namespace, p.Name, ct.Name, ct.Image, orDash(ids[ct.Name])})
		}
	}
	for i := range c.operators {
		for j := range c.operators[i].pods {
			add(&c.operators[i].pods[j])
		}
	}
	for i := range c.stacks {
		for j := range c.stacks[i].pods {
			add(&c.stacks[i].pods[j])
		}
	}
	var b bytes.Buffer
	if err := printTable(&b, columns([]string{"NAMESPACE", "POD", "CONTAINER", "IMAGE", "IMAGE-ID"}, -1), rows, false, false); err != nil {
		c.a.fail("images.txt", "the images the pods run", err)
		return
	}
	c.a.add("images.txt", "the images the operator's and the stacks' pods run, and their digests", b.Bytes())
}

// writeEvents writes the events of the object uid of namespace ns, oldest first.
func (c *collector) writeEvents(ctx context.Context, name, what, ns string, uid types.UID) {
	list := &corev1.EventList{}
	if err := c.src.client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{"involvedObject.uid": string(uid)}); err != nil {
		c.a.fail(name, what, err)
		return
	}
	sort.SliceStable(list.Items, func(i, j int) bool { return eventTime(&list.Items[i]).Before(eventTime(&list.Items[j])) })
	c.writeList(name, what, list)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// conditionsTable is a StackInstance's conditions as kubectl describe lists them.
func conditionsTable(conds []metav1.Condition) []byte {
	if len(conds) == 0 {
		return []byte("no conditions yet (the operator has not reconciled the StackInstance)\n")
	}
	rows := make([][]string, 0, len(conds))
	for _, c := range conds {
		rows = append(rows, []string{c.Type, string(c.Status), c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339),
			fmt.Sprint(c.ObservedGeneration), c.Message})
	}
	var b bytes.Buffer
	_ = printTable(&b, columns([]string{"TYPE", "STATUS", "REASON", "SINCE", "GENERATION", "MESSAGE"}, -1), rows, false, false)
	return b.Bytes()
}

// writeYAML writes obj as YAML, with its apiVersion and kind, and its metadata redacted.
func (c *collector) writeYAML(name, what string, obj client.Object) {
	c.setKind(obj)
	c.a.redact.meta(obj)
	data, err := yamlOf(obj)
	if err != nil {
		c.a.fail(name, what, err)
		return
	}
	c.a.add(name, what, data)
}

// writeList writes a list as kubectl get -o yaml does: each item with its apiVersion and kind.
func (c *collector) writeList(name, what string, list client.ObjectList) {
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			c.setKind(obj)
			c.a.redact.meta(obj)
		}
		return nil
	})
	c.setKind(list)
	data, err := yamlOf(list)
	if err != nil {
		c.a.fail(name, what, err)
		return
	}
	c.a.add(name, what, data)
}

// setKind sets what the client leaves out of a typed object it read: its apiVersion and kind.
func (c *collector) setKind(obj runtime.Object) {
	if gvks, _, err := c.src.client.Scheme().ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
}

func (c *collector) writeJSON(name, what string, v any) {
	data, err := jsonIndent(v)
	if err != nil {
		c.a.fail(name, what, err)
		return
	}
	c.a.add(name, what, data)
}

// jsonIndent is v as indented JSON, escaped as -o json escapes it (escapeJSON).
func jsonIndent(v any) ([]byte, error) {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(escapeJSON(raw), '\n'), nil
}

// yamlOf is v as YAML, through the same escaped JSON as -o yaml (YAML's parser refuses raw
// control characters, which a hostile annotation could hold).
func yamlOf(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(escapeJSON(raw))
}

// cachedStatuses answers the /status reads already made, so that doctor does not ask the same
// pods again, and asks next for the others.
type cachedStatuses struct {
	podStatuses
	next podStatusReader
}

func (c cachedStatuses) readStatus(ctx context.Context, pod *corev1.Pod) (*podcontract.DataplaneStatus, error) {
	k := podKey{pod.Namespace, pod.Name}
	if s := c.got[k]; s != nil {
		return s, nil
	}
	if err := c.errs[k]; err != nil {
		return nil, err
	}
	return c.next.readStatus(ctx, pod)
}

// podConfigs are the /config answers of pods, and why the others' could not be read.
type podConfigs struct {
	got  map[podKey]*podcontract.RunningConfig
	errs map[podKey]error
}

// readConfigs asks every running pod of pods for its /config, as readStatuses asks for /status.
func readConfigs(ctx context.Context, r podConfigReader, pods []*corev1.Pod) podConfigs {
	got, errs := askEachPod(ctx, pods, r.readConfig)
	return podConfigs{got: got, errs: errs}
}
