package podcontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// Placement: F-Stack's lcores busy-poll, so an lcore that shares its CPU with an app worker,
// another lcore or the switch's PMD thread gets a slice of it and the group serves a fraction
// of what it could (F-Stack's shim guidance: each instance and its app on different cores).
// Under kubelet's static CPU manager the dataplane's CPUs are exclusive and nothing overlaps.
// Under the lab's cpuPolicy Shared both containers run on the node's shared pool, so the
// dataplane picks its lcores' CPUs (PlaceLcores) and tells the app containers which they are
// (PlacementFile): each launcher keeps the app off them (AppCPUs).

// PlacementFile, in ShimDir, is where the supervisor records its lcores' CPUs and the switch's,
// before it places the launcher, so every start of an app finds it.
const PlacementFile = "placement.json"

// placementMaxSize bounds what ReadPlacement accepts: the lists are bounded by MaxCPU.
const placementMaxSize = 64 << 10

// Placement is what the supervisor decided and the launchers follow.
type Placement struct {
	// LcoreCPUs are the CPUs F-Stack's processes busy-poll on, ascending.
	LcoreCPUs []int `json:"lcoreCPUs"`
	// SwitchCPUs are the CPUs the switch's PMD threads poll on (the device info's), ascending.
	SwitchCPUs []int `json:"switchCPUs,omitempty"`
	// Warnings say what the CPUs the pod was given could not keep apart.
	Warnings []string `json:"warnings,omitempty"`
}

// Validate checks what a launcher relies on.
func (p *Placement) Validate() error {
	if len(p.LcoreCPUs) == 0 {
		return errors.New("placement: lcoreCPUs is empty")
	}
	if err := checkCPUList(p.LcoreCPUs); err != nil {
		return fmt.Errorf("placement: lcoreCPUs: %w", err)
	}
	if err := checkCPUList(p.SwitchCPUs); err != nil {
		return fmt.Errorf("placement: switchCPUs: %w", err)
	}
	return nil
}

// ReadPlacement reads PlacementFile in dir, never through a symlink; a missing file is
// (nil, nil): a dataplane that records none.
func ReadPlacement(dir string) (*Placement, error) {
	b, err := fsutil.ReadFileBeneath(dir, PlacementFile, placementMaxSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	var p Placement
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// PlaceLcores picks the need CPUs of cpus (the dataplane's cpuset, ascending) the lcores run on,
// ascending. CPUs the switch polls on come last. shared (cpuPolicy Shared, where the app
// containers run on the same pool) takes the highest CPUs, leaving the lowest to the app: the
// shim names app CPUs up to MaxShimLcore only, and F-Stack's tools default to CPU 0.
func PlaceLcores(cpus []int, need int, switchCPUs []int, shared bool) []int {
	if need >= len(cpus) {
		return slices.Clone(cpus)
	}
	var free, polled []int
	for _, c := range cpus {
		if slices.Contains(switchCPUs, c) {
			polled = append(polled, c)
		} else {
			free = append(free, c)
		}
	}
	if shared {
		slices.Reverse(free)
		slices.Reverse(polled)
	}
	chosen := append(free, polled...)[:need]
	slices.Sort(chosen)
	return chosen
}

// PlacementWarnings says what the chosen lcore CPUs share: the switch's PMD, and the app's
// workers when appCPUs (the app containers' cpuset where the supervisor knows it, the shared
// pool under cpuPolicy Shared; nil where it does not, and where no app runs under the shim)
// has no CPU the launcher can keep them on. It asks AppCPUs, which the launcher follows, so the
// warning and what the launcher does cannot disagree.
func PlacementWarnings(lcores, switchCPUs, appCPUs []int) []string {
	var w []string
	if s := switchWarning(lcores, switchCPUs); s != "" {
		w = append(w, s)
	}
	if len(appCPUs) > 0 {
		if _, apart := AppCPUs(appCPUs, &Placement{LcoreCPUs: lcores, SwitchCPUs: switchCPUs}); !apart {
			w = append(w, fmt.Sprintf("cpuPolicy Shared: the shared pool (CPUs %s) has no CPU beside the lcores' for the app, whose workers then share them; "+
				"a node with more shared CPUs, or cpuPolicy Exclusive, separates them", JoinCPUs(appCPUs)))
		}
	}
	return w
}

// switchWarning says which lcore CPUs the switch's PMD threads also poll, or "".
func switchWarning(lcores, switchCPUs []int) string {
	polled := map[int]bool{}
	for _, c := range switchCPUs {
		polled[c] = true
	}
	var both []string
	for _, c := range lcores {
		if polled[c] {
			both = append(both, fmt.Sprint(c))
		}
	}
	if len(both) == 0 {
		return ""
	}
	return fmt.Sprintf("lcore CPU %s is also polled by the switch's PMD thread (OVS pmd-cpu-mask): each gets part of the CPU; "+
		"give the dataplane CPUs the switch does not poll (kubelet's reservedSystemCPUs for the PMD)", strings.Join(both, ","))
}

// SharedCPUs says in one printable line what the lcores share, for people: the Warning Event
// the operator records on the pod and the pod's row in `kubectl fstack status` both say it in
// these words (each cut to its own length). "" when nothing is shared. p comes from the pod
// (its /status), so the line is made printable here; the supervisor's warnings are all of it,
// but an lcore the placement itself shows on a switch CPU is said even when they omit it.
func (p *Placement) SharedCPUs() string {
	if p == nil {
		return ""
	}
	var said []string
	for _, w := range p.Warnings {
		if strings.TrimSpace(w) != "" {
			said = append(said, w)
		}
	}
	if s := switchWarning(p.LcoreCPUs, p.SwitchCPUs); s != "" && !slices.Contains(said, s) {
		said = append(said, s)
	}
	if len(said) == 0 {
		return ""
	}
	return "CPUs shared: " + Printable(strings.Join(said, "; "))
}

// AppCPUs orders the app container's CPUs (own, ascending) for its workers: those no lcore runs
// on first, the switch's last. With no CPU free of lcores it returns own as it is and false:
// the app shares the lcores' CPUs.
func AppCPUs(own []int, p *Placement) ([]int, bool) {
	if p == nil {
		return own, true
	}
	var free, polled []int
	for _, c := range own {
		switch {
		case slices.Contains(p.LcoreCPUs, c):
		case slices.Contains(p.SwitchCPUs, c):
			polled = append(polled, c)
		default:
			free = append(free, c)
		}
	}
	if len(free)+len(polled) == 0 {
		return own, false
	}
	return append(free, polled...), true
}

// JoinCPUs writes CPUs in the order given, comma-separated ("2,3,0"): an order matters where
// it is used (the app's CPUs, worker i on the i-th), so no ranges.
func JoinCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}
