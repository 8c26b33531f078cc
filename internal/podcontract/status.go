package podcontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// StatusPath is the supervisor's JSON account of the dataplane on SupervisorPort: its
// generation, whether it is ready and why not, every restart it made in place (the dataplane's
// generations and the apps' processes, which the containers' restartCount no longer shows) and
// each port's link. Like MetricsPath it answers any caller; `kubectl fstack status` and `doctor`
// read it through the API server's pod proxy, the operator from the pod's IP.
const StatusPath = "/status"

// MaxStatusBytes bounds what a reader of StatusPath takes from a pod: the pod writes every byte
// of the answer, and a real one is a few KiB even with many apps and ports.
const MaxStatusBytes = 64 << 10

// DataplaneStatus is the answer of StatusPath.
type DataplaneStatus struct {
	// Generation counts the dataplane's generations in this container, from 1.
	Generation int  `json:"generation"`
	Ready      bool `json:"ready"`
	// Reason is the supervisor's health text: "ready", or why not (a port's link down, a
	// process restarting).
	Reason   string          `json:"reason"`
	Restarts InPlaceRestarts `json:"restarts"`
	Ports    []PortStatus    `json:"ports,omitempty"`
}

// InPlaceRestarts are the restarts made inside the containers.
type InPlaceRestarts struct {
	// Dataplane counts the generations restarted by the supervisor.
	Dataplane RestartCount `json:"dataplane"`
	// Apps are the apps' processes restarted by their launcher, by app (container) name.
	Apps map[string]RestartCount `json:"apps,omitempty"`
}

// RestartCount is how often one thing restarted in place, why, and the last time. The counts
// are ints as the supervisor's own type has them.
type RestartCount struct {
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason,omitempty"`
	Last     *RestartRecord `json:"last,omitempty"`
}

// RestartRecord is one restart.
type RestartRecord struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// PortStatus is one DPDK port of the dataplane and its link.
type PortStatus struct {
	Port       int    `json:"port"`
	Attachment string `json:"attachment"`
	LinkUp     bool   `json:"linkUp"`
	// DownSince is when the link went down; nil while it is up.
	DownSince *time.Time `json:"downSince,omitempty"`
}

// Limits on a decoded status: past them the answer is no supervisor's, and a reader that keeps
// statuses (the operator) must not hold whatever a pod sends.
const (
	maxStatusApps  = 64
	maxStatusPorts = 64
	maxStatusText  = 4 << 10
)

// ReadDataplaneStatus decodes StatusPath's answer from r, reading at most MaxStatusBytes, and
// refuses one that no supervisor writes (negative counts, more apps or ports than a pod has,
// texts longer than a health message). The texts are the pod's: print them through a sanitizer.
func ReadDataplaneStatus(r io.Reader) (*DataplaneStatus, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StatusPath, err)
	}
	if len(body) > MaxStatusBytes {
		return nil, fmt.Errorf("%s answered more than %d bytes: no supervisor's answer", StatusPath, MaxStatusBytes)
	}
	s := &DataplaneStatus{}
	if err := json.Unmarshal(body, s); err != nil {
		return nil, fmt.Errorf("%s is not the supervisor's JSON: %w", StatusPath, err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", StatusPath, err)
	}
	return s, nil
}

func (s *DataplaneStatus) check() error {
	var errs []error
	text := func(what, v string) {
		if len(v) > maxStatusText {
			errs = append(errs, fmt.Errorf("%s is %d bytes long, more than %d", what, len(v), maxStatusText))
		}
	}
	count := func(what string, c RestartCount) {
		if c.Total < 0 {
			errs = append(errs, fmt.Errorf("%s: negative total %d", what, c.Total))
		}
		if len(c.ByReason) > maxStatusApps {
			errs = append(errs, fmt.Errorf("%s: %d reasons", what, len(c.ByReason)))
		}
		for k, v := range c.ByReason {
			text(what+" reason", k)
			if v < 0 {
				errs = append(errs, fmt.Errorf("%s: negative count %d for %q", what, v, k))
			}
		}
		if c.Last != nil {
			text(what+" last reason", c.Last.Reason)
			text(what+" last message", c.Last.Message)
		}
	}
	if s.Generation < 0 {
		errs = append(errs, fmt.Errorf("negative generation %d", s.Generation))
	}
	text("reason", s.Reason)
	count("restarts.dataplane", s.Restarts.Dataplane)
	if len(s.Restarts.Apps) > maxStatusApps {
		errs = append(errs, fmt.Errorf("%d apps, more than %d", len(s.Restarts.Apps), maxStatusApps))
	}
	for name, c := range s.Restarts.Apps {
		text("app name", name)
		count("restarts.apps", c)
	}
	if len(s.Ports) > maxStatusPorts {
		errs = append(errs, fmt.Errorf("%d ports, more than %d", len(s.Ports), maxStatusPorts))
	}
	for _, p := range s.Ports {
		text("port attachment", p.Attachment)
	}
	return errors.Join(errs...)
}

// AppRestarts is the sum of the apps' in-place restarts.
func (s *DataplaneStatus) AppRestarts() int64 {
	var n int64
	for _, c := range s.Restarts.Apps {
		n += int64(c.Total)
	}
	return n
}

// DownPorts are the ports whose link is down.
func (s *DataplaneStatus) DownPorts() []PortStatus {
	var out []PortStatus
	for _, p := range s.Ports {
		if !p.LinkUp {
			out = append(out, p)
		}
	}
	return out
}
