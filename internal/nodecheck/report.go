// Package nodecheck judges whether a node can run F-Stack pods: hugepages per size, the kubelet's
// CPU manager policy, OVS-DPDK (the bridge, DPDK initialised, an uplink that is up, PMD CPUs
// outside the kubelet's exclusive CPUs), the vhost-user socket root, cgroup version, ASLR and
// IOMMU/vfio. It reads only files beneath the roots it is given (never through a symlink or
// "..") and asks OVSDB through an interface, so tests point it at temp dirs; the node agent
// (cni/internal/nodeagent) runs it and publishes the Report on its Node.
package nodecheck

import (
	"encoding/json"
	"fmt"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// Status of one check.
type Status string

const (
	// Pass: the node has what the check asks for.
	Pass Status = "pass"
	// Fail: pods that need this would fail on the node; its label is absent.
	Fail Status = "fail"
	// Warn: informational; pods are not kept off the node for it.
	Warn Status = "warn"
)

// Check is the result of one check, as published in the report annotation.
type Check struct {
	// Name is the check's name, e.g. hugepages-2Mi, cpu-manager, ovs-bridge.
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do when the check did not pass.
	Fix string `json:"fix,omitempty"`
	// Label is the node label this check (with others) decides, empty for none.
	Label string `json:"label,omitempty"`
}

// Report is every check of one node and the labels they imply.
type Report struct {
	Checks []Check           `json:"checks"`
	Labels map[string]string `json:"labels"`
}

// Marshal is the report as the annotation's value.
func (r *Report) Marshal() string {
	raw, _ := json.Marshal(r) // strings and maps only: cannot fail
	return string(raw)
}

// ParseReport reads the annotation's value.
func ParseReport(s string) (*Report, error) {
	var r Report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", fsv1.NodeReportAnnotation, err)
	}
	return &r, nil
}

// Failed is the checks that did not pass (Fail and Warn), in order.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status != Pass {
			out = append(out, c)
		}
	}
	return out
}

// label derives the labels from the checks: a readiness label is set only when no check naming
// it failed; informational labels carry the value the check put in labelValues.
func (r *Report) label(values map[string]string) {
	r.Labels = map[string]string{}
	ok := map[string]bool{}
	for _, c := range r.Checks {
		if c.Label == "" {
			continue
		}
		// A warning informs: it keeps no pod off the node (a bridge with no uplink still serves
		// the node's own pods).
		prev, seen := ok[c.Label]
		ok[c.Label] = c.Status != Fail && (!seen || prev)
	}
	for key, passed := range ok {
		if v, informational := values[key]; informational {
			r.Labels[key] = v
			continue
		}
		if passed {
			r.Labels[key] = fsv1.NodeReady
		}
	}
	if ok[fsv1.NodeLabelCPUManager] {
		r.Labels[fsv1.NodeLabelCPUManager] = fsv1.NodeCPUManagerStatic
	}
}
