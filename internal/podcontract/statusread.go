package podcontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The reader's names for the supervisor's types (status.go), which its callers were written with.
type (
	DataplaneStatus = Status
	InPlaceRestarts = StatusRestart
	RestartCount    = Restarts
	RestartRecord   = RestartEvent
)

// MaxStatusBytes bounds what a reader of StatusPath takes from a pod: the pod writes every byte
// of the answer, and a real one is a few KiB even with many apps and ports.
const MaxStatusBytes = StatusMax

// Limits on a decoded status: past them the answer is no supervisor's, and a reader that keeps
// statuses (the operator) must not hold whatever a pod sends.
const (
	maxStatusApps  = 64
	maxStatusPorts = MaxPorts
	maxStatusText  = 4 << 10
	// maxPlacementWarnings: PlacementWarnings says at most two things.
	maxPlacementWarnings = 8
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
	if p := s.Placement; p != nil {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
		if len(p.Warnings) > maxPlacementWarnings {
			errs = append(errs, fmt.Errorf("placement: %d warnings, more than %d", len(p.Warnings), maxPlacementWarnings))
		}
		for _, w := range p.Warnings {
			text("placement warning", w)
		}
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
