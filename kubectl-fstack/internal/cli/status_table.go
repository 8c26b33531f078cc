package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/served"
)

// hashLen is how much of a config hash the table shows, as git shows commits.
const hashLen = 12

// StackStatusList is what `status -o json|yaml` prints: every StackInstance shown and its pods.
type StackStatusList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []StackStatus `json:"items"`
}

// StackStatus is one StackInstance.
type StackStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is the StackInstance's status.ready (ready/bound pods).
	Ready string `json:"ready"`
	// ConfigHash is the hash of the config the StackInstance's spec renders now (status.configHash).
	ConfigHash string `json:"configHash,omitempty"`
	// VIPs are the stack's shared addresses (every port's and VLAN's vips and vips6): each of
	// its pods serves them too.
	VIPs []string `json:"vips,omitempty"`
	// Pods are the pods labelled kubefstack.io/stack with its name, by name.
	Pods []PodStatus `json:"pods"`
}

// PodStatus is one pod of a StackInstance.
type PodStatus struct {
	Name string `json:"name"`
	// Node is spec.nodeName, empty while unscheduled.
	Node string `json:"node,omitempty"`
	// Addresses are what the pod's F-Stack serves (its kubefstack.io/addresses annotation, or
	// the static addresses of its spec snapshot): where clients and Services reach it.
	Addresses []ServedAddress `json:"addresses,omitempty"`
	// AddressError says why (some of) the served addresses are not known.
	AddressError string `json:"addressError,omitempty"`
	// IP is the pod's kernel IP (status.podIP): the cluster network's, where F-Stack does not
	// listen.
	IP string `json:"ip,omitempty"`
	// ConfigHash is the hash the injector admitted the pod with, empty if it was not injected.
	ConfigHash string `json:"configHash,omitempty"`
	// Config is "current" (the StackInstance's hash), "old" (recreate the pod to apply the
	// spec) or "unknown" (not injected, or the StackInstance has no hash yet).
	Config      string          `json:"config"`
	Terminating bool            `json:"terminating,omitempty"`
	Dataplane   DataplaneStatus `json:"dataplane"`
	// Program is set when the pod's dataplane is a program linked with libfstack (the
	// StackInstance's spec.program): its mode and the name its container had before it became
	// the dataplane, from the pod's kubefstack.io/status annotation.
	Program *inject.ProgramStatus `json:"program,omitempty"`
	// Apps are the pod's other containers: their restarts, and those their launcher made in place.
	Apps []AppStatus `json:"apps,omitempty"`
	// Unschedulable says, for a pod the scheduler could not place, how many nodes fail its
	// required node selection, the first of them and the labels it lacks.
	Unschedulable string `json:"unschedulable,omitempty"`
	// StatusError says why the supervisor's /status (in-place restarts, health, ports) could not
	// be read for a running pod: then those fields are absent.
	StatusError string `json:"statusError,omitempty"`
}

// ServedAddress is one address a pod's F-Stack serves, on the stack port of that index.
type ServedAddress struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
}

// AppStatus is one app container (or an app the supervisor's /status names that is no container).
type AppStatus struct {
	Name string `json:"name"`
	// Restarts is the container's restartCount.
	Restarts int32 `json:"restarts"`
	// InPlaceRestarts are the app's restarts inside its container (the launcher's), from /status.
	InPlaceRestarts *int64                     `json:"inPlaceRestarts,omitempty"`
	LastRestart     *podcontract.RestartRecord `json:"lastRestart,omitempty"`
}

// DataplaneStatus is the pod's dataplane container.
type DataplaneStatus struct {
	// State is "running", "waiting", "terminated", or "unknown" when the pod has no status for it.
	State    string `json:"state"`
	Ready    bool   `json:"ready"`
	Reason   string `json:"reason,omitempty"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Restarts is the container's restartCount: the restarts the kubelet made.
	Restarts int32  `json:"restarts"`
	Image    string `json:"image,omitempty"`
	// The rest is the supervisor's /status, absent when it could not be read (statusError).
	// InPlaceRestarts are the dataplane's generations the supervisor restarted inside the
	// container, which restartCount does not count.
	InPlaceRestarts *int64                     `json:"inPlaceRestarts,omitempty"`
	LastRestart     *podcontract.RestartRecord `json:"lastRestart,omitempty"`
	Generation      int64                      `json:"generation,omitempty"`
	// Health is the supervisor's word: "ready", or why the dataplane is not.
	Health string                   `json:"health,omitempty"`
	Ports  []podcontract.PortStatus `json:"ports,omitempty"`
	// Placement is where the supervisor put the lcores, and what they share.
	Placement *podcontract.Placement `json:"placement,omitempty"`
}

func newStackStatusList() *StackStatusList {
	return &StackStatusList{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "StackStatusList"}, Items: []StackStatus{}}
}

// addStack adds si and its pods, with what the pods' supervisors answered (st).
func (l *StackStatusList) addStack(si *fsv1.StackInstance, pods []corev1.Pod, st podStatuses) {
	ready := si.Status.Ready
	if ready == "" {
		ready = fmt.Sprintf("%d/%d", si.Status.ReadyPods, si.Status.BoundPods)
	}
	s := StackStatus{Namespace: si.Namespace, Name: si.Name, Ready: ready, ConfigHash: si.Status.ConfigHash, Pods: []PodStatus{},
		VIPs: served.VIPs(&si.Spec)}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for i := range pods {
		p := &pods[i]
		ps := PodStatus{Name: p.Name, Node: p.Spec.NodeName, IP: p.Status.PodIP, Terminating: p.DeletionTimestamp != nil,
			ConfigHash: p.Annotations[podcontract.ConfigHashAnnotation]}
		switch {
		case ps.ConfigHash == "" || si.Status.ConfigHash == "":
			ps.Config = "unknown"
		case ps.ConfigHash == si.Status.ConfigHash:
			ps.Config = "current"
		default:
			ps.Config = "old"
		}
		ps.Dataplane = dataplaneStatus(p)
		ps.addAddresses(p)
		if st, err := inject.ReadStatus(p); err == nil && st != nil {
			ps.Program = st.Program
		}
		ps.Apps = appStatuses(p)
		k := podKey{p.Namespace, p.Name}
		ps.Unschedulable = st.unschedulable[k]
		if sv := st.got[k]; sv != nil {
			ps.addSupervisor(sv)
		} else if err := st.errs[k]; err != nil {
			ps.StatusError = err.Error()
		}
		s.Pods = append(s.Pods, ps)
	}
	l.Items = append(l.Items, s)
}

// addAddresses adds the pod's served addresses; a pod that was not injected has none to show.
func (ps *PodStatus) addAddresses(p *corev1.Pod) {
	if _, injected := p.Annotations[podcontract.SpecAnnotation]; !injected {
		return
	}
	addrs, err := served.All(p)
	for _, a := range addrs {
		ps.Addresses = append(ps.Addresses, ServedAddress{Port: a.Port, Address: a.Addr.String()})
	}
	if err != nil {
		ps.AddressError = err.Error()
	}
}

// addressColumn is the served addresses, those of port 0 bare and the others with their port,
// then the stack's VIPs; "-" when none is known.
func addressColumn(p PodStatus, vips []string) string {
	var parts []string
	for _, a := range p.Addresses {
		if a.Port == 0 {
			parts = append(parts, a.Address)
		} else {
			parts = append(parts, fmt.Sprintf("%s (port %d)", a.Address, a.Port))
		}
	}
	if p.AddressError != "" {
		parts = append(parts, "unknown: "+podcontract.Clip(p.AddressError, maxReasonText))
	}
	if len(parts) > 0 {
		for _, v := range vips {
			parts = append(parts, "vip "+v)
		}
	}
	return orDash(strings.Join(parts, ", "))
}

func dataplaneStatus(p *corev1.Pod) DataplaneStatus {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name != podcontract.DataplaneContainer {
			continue
		}
		d := DataplaneStatus{State: "unknown", Ready: s.Ready, Restarts: s.RestartCount, Image: s.Image}
		switch {
		case s.State.Running != nil:
			d.State = "running"
		case s.State.Waiting != nil:
			d.State, d.Reason = "waiting", s.State.Waiting.Reason
		case s.State.Terminated != nil:
			code := s.State.Terminated.ExitCode
			d.State, d.Reason, d.ExitCode = "terminated", s.State.Terminated.Reason, &code
		}
		return d
	}
	return DataplaneStatus{State: "unknown", Reason: "no status (pod " + orDash(string(p.Status.Phase)) + ")"}
}

// appStatuses are the pod's regular containers but the dataplane (a program's is one).
func appStatuses(p *corev1.Pod) []AppStatus {
	var out []AppStatus
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != podcontract.DataplaneContainer {
			out = append(out, AppStatus{Name: c.Name, Restarts: c.RestartCount})
		}
	}
	return out
}

// addSupervisor adds what the pod's supervisor says of its restarts in place and its health.
func (ps *PodStatus) addSupervisor(sv *podcontract.DataplaneStatus) {
	d := &ps.Dataplane
	total := int64(sv.Restarts.Dataplane.Total)
	d.InPlaceRestarts, d.LastRestart, d.Generation, d.Health, d.Ports = &total, sv.Restarts.Dataplane.Last, int64(sv.Generation), sv.Reason, sv.Ports
	d.Placement = sv.Placement
	names := make([]string, 0, len(sv.Restarts.Apps))
	for name := range sv.Restarts.Apps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := sv.Restarts.Apps[name]
		i := slices.IndexFunc(ps.Apps, func(a AppStatus) bool { return a.Name == name })
		if i < 0 {
			ps.Apps = append(ps.Apps, AppStatus{Name: name})
			i = len(ps.Apps) - 1
		}
		n := int64(c.Total)
		ps.Apps[i].InPlaceRestarts, ps.Apps[i].LastRestart = &n, c.Last
	}
}

// configColumns shows the pod's config hash and whether it is the StackInstance's current one.
func configColumns(p PodStatus, current string, full bool) (hash, config string) {
	cut := short
	if full {
		cut = func(h string) string { return h }
	}
	switch {
	case p.ConfigHash == "":
		return "-", "unknown (not injected)"
	case current == "":
		return cut(p.ConfigHash), "unknown (no current hash yet)"
	case p.Config == "current":
		return cut(p.ConfigHash), "current"
	default:
		return cut(p.ConfigHash), "old (current " + cut(current) + ")"
	}
}

// maxReasonText is as much of the supervisor's reason as the table shows; -o json has it whole.
const maxReasonText = 160

// dataplaneColumns describes the dataplane container as kubectl describe would, in one word or
// two, with the supervisor's reason when it is not ready, and its restarts: the kubelet's and
// the supervisor's in place.
func dataplaneColumns(p PodStatus) (state, restarts string) {
	if p.Terminating {
		state = "Terminating, "
	}
	d := p.Dataplane
	switch {
	case d.State == "running" && d.Ready:
		state += "Running, ready"
	case d.State == "running" && d.Health != "" && d.Health != "ready":
		state += "Running, not ready: " + podcontract.Clip(d.Health, maxReasonText)
	case d.State == "running":
		state += "Running, not ready"
	case d.State == "waiting":
		state += "Waiting: " + orDash(d.Reason)
	case d.State == "terminated":
		state += fmt.Sprintf("Terminated: %s (exit %d)", orDash(d.Reason), *d.ExitCode)
	case p.Unschedulable != "":
		state += "Unschedulable: " + podcontract.Clip(p.Unschedulable, maxReasonText)
	case d.Reason != "":
		state += d.Reason
	default:
		state += "unknown"
	}
	if d.State == "running" && d.Ready {
		// Ready while a port is down: the supervisor has not noticed (an image without the link
		// watch), or has just seen it come back.
		for _, port := range d.Ports {
			if !port.LinkUp {
				state += fmt.Sprintf("; port %d (%s) link down", port.Port, port.Attachment)
			}
		}
	}
	if shared := d.Placement.SharedCPUs(); shared != "" && d.State == "running" {
		// What busy-polling shares costs most of the throughput: said in the row in the words
		// of the pod's CPUsShared event, whole in -o json.
		state += "; " + podcontract.Clip(shared, maxReasonText)
	}
	if p.Program != nil {
		state += fmt.Sprintf(" (program %s, was container %s)", p.Program.Mode, p.Program.Container)
	}
	return state, restartText(int64(d.Restarts), d.InPlaceRestarts)
}

// appRestarts sums the apps' container and in-place restarts.
func appRestarts(p PodStatus) string {
	var n int64
	var inPlace *int64
	for _, a := range p.Apps {
		n += int64(a.Restarts)
		if a.InPlaceRestarts != nil {
			if inPlace == nil {
				inPlace = new(int64)
			}
			*inPlace += *a.InPlaceRestarts
		}
	}
	return restartText(n, inPlace)
}

// restartText is the container restarts plus those made in place: "3 (2 in place)"; the
// container's count alone when the in-place ones are unknown or none.
func restartText(container int64, inPlace *int64) string {
	if inPlace == nil || *inPlace == 0 {
		return fmt.Sprint(container)
	}
	return fmt.Sprintf("%d (%d in place)", container+*inPlace, *inPlace)
}

// statusRow is one row of the table: a pod and its StackInstance, or a StackInstance without
// pods. Its JSON is what --sort-by's JSONPath reads: the StackInstance's fields as in -o json
// (namespace, name, ready, configHash, vips) and the pod's under pod (pod.node,
// pod.dataplane.restarts, ...).
type statusRow struct {
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	Ready      string     `json:"ready"`
	ConfigHash string     `json:"configHash,omitempty"`
	VIPs       []string   `json:"vips,omitempty"`
	Pod        *PodStatus `json:"pod,omitempty"`
	cells      []string
}

// statusTable are the table's options: the namespace column (-A), -o wide, --no-headers and
// --sort-by.
type statusTable struct {
	withNamespace, wide bool
	tableFlags
}

// writeTable prints the list as the table, with each pod's served addresses; wide adds the
// pod's kernel IP and the dataplane's image and shows whole config hashes. Without headers
// (--no-headers) the rows alone, for scripts, as kubectl's; --sort-by orders the rows.
func (l *StackStatusList) writeTable(w io.Writer, o statusTable) error {
	names := []string{"STACK", "READY", "POD", "NODE", "ADDRESSES", "CONFIG-HASH", "CONFIG", "DATAPLANE", "RESTARTS", "APP-RESTARTS", "KERNEL-IP", "IMAGE"}
	wideFrom := len(names) - 2
	if o.withNamespace {
		names = append([]string{"NAMESPACE"}, names...)
		wideFrom++
	}
	rows := l.rows(o.withNamespace, o.wide)
	if err := sortByPath(rows, o.sortBy); err != nil {
		return err
	}
	cells := make([][]string, len(rows))
	for i := range rows {
		cells[i] = rows[i].cells
	}
	// Annotations and status are anyone's with the right to edit them: printTable prints them as
	// safe text, and a tab in one cannot shift the columns.
	return printTable(w, columns(names, wideFrom), cells, o.wide, o.noHeaders)
}

// rows are the table's rows, a pod each, or "<none>" for a StackInstance without pods.
func (l *StackStatusList) rows(withNamespace, wide bool) []statusRow {
	var rows []statusRow
	add := func(s StackStatus, p *PodStatus, cols []string) {
		cols = append([]string{s.Name, s.Ready}, cols...)
		if withNamespace {
			cols = append([]string{s.Namespace}, cols...)
		}
		rows = append(rows, statusRow{Namespace: s.Namespace, Name: s.Name, Ready: s.Ready, ConfigHash: s.ConfigHash, VIPs: s.VIPs, Pod: p, cells: cols})
	}
	for _, s := range l.Items {
		if len(s.Pods) == 0 {
			add(s, nil, []string{"<none>", "", "", "", "", "", "", "", "", ""})
			continue
		}
		for i := range s.Pods {
			p := &s.Pods[i]
			hash, config := configColumns(*p, s.ConfigHash, wide)
			state, restarts := dataplaneColumns(*p)
			add(s, p, []string{p.Name, orDash(p.Node), addressColumn(*p, s.VIPs), hash, config, state, restarts, appRestarts(*p),
				orDash(p.IP), orDash(p.Dataplane.Image)})
		}
	}
	return rows
}

func short(h string) string {
	if len(h) > hashLen {
		return h[:hashLen]
	}
	return h
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
