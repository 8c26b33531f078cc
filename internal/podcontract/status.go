package podcontract

import "time"

// StatusPath answers the dataplane's state as JSON (Status): the generation, readiness, the
// in-place restarts of the dataplane and of each app container, and the ports' links. It is on
// SupervisorPort beside MetricsPath and reachable as that is; `kubectl fstack status` and
// `doctor` read it.
const StatusPath = "/status"

// StatusMax bounds a /status answer: the supervisor never writes more, and a reader need not
// read more.
const StatusMax = 64 << 10

// Status is the answer of StatusPath.
type Status struct {
	// Generation is the dataplane's current generation (GenerationFile); 0 before the first.
	Generation int `json:"generation"`
	// Ready is /readyz's answer; Reason says why not, or "ready".
	Ready    bool          `json:"ready"`
	Reason   string        `json:"reason"`
	Restarts StatusRestart `json:"restarts"`
	// Ports are the stack's ports and their links, in port order; empty when the supervisor
	// does not watch them.
	Ports []PortStatus `json:"ports"`
	// Placement is where the lcores run and what they share (PlacementFile's content); absent
	// before the first render.
	Placement *Placement `json:"placement,omitempty"`
}

// StatusRestart holds the in-place restarts: the supervisor's own, and each app container's
// launcher's by container name (only containers whose launcher has restarted their app).
type StatusRestart struct {
	Dataplane Restarts            `json:"dataplane"`
	Apps      map[string]Restarts `json:"apps"`
}

// PortStatus is one port of the stack: its DPDK port id, the attachment (network interface
// name in the pod) it came from, whether its link is up, and since when it is down.
type PortStatus struct {
	Port       int        `json:"port"`
	Attachment string     `json:"attachment"`
	LinkUp     bool       `json:"linkUp"`
	DownSince  *time.Time `json:"downSince,omitempty"`
}
