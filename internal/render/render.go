// Package render turns a StackInstance spec and the facts of one pod into what F-Stack runs:
// config.ini, the EAL argv F-Stack builds from it for each process, and what the app containers'
// launcher needs to give the app the shim's environment. Prepare applies every default to a spec
// and checks everything F-Stack itself would crash on or silently ignore, returning every problem
// at once with its field path, once per path; what it returns (a *Spec) is what the rest takes.
// It is pure: the operator, the dataplane supervisor and the CLI share it.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Result is what one pod's F-Stack runs.
type Result struct {
	// Config is config.ini.
	Config []byte
	// EAL[k] is the argv F-Stack builds for process k (argv[0] included).
	EAL [][]string
	// LcoreMask is the lcore_mask written to config.ini.
	LcoreMask string
	// PortIDs maps a port name to its DPDK port id.
	PortIDs map[string]int
	// ShimEnv is what the injection adds to the environment of the app containers that use the
	// shim, in a stable order: only kube-fstack's names (podcontract.EnvInstances), never the
	// shim's own, which the launcher gives the app's process tree alone.
	ShimEnv []EnvVar
	// ShimEAL is the argv the shim passes to DPDK as a secondary; nil when the app's CPU is unknown.
	ShimEAL []string
	// CPUs[k] is the CPU process k runs on; several processes share one with
	// spec.dpdk.lcoresPerCPU > 1 (lab only).
	CPUs []int
	// FStackEnv is what the supervisor adds to the environment of every F-Stack process (a
	// native program's, and F-Stack's Nginx's workers through an env directive): with
	// spec.dpdk.lcoresPerCPU > 1, podcontract.EnvLcoreCPUs, which patch 0003 turns into EAL's
	// --lcores=<lcore>@<CPU>. EAL already shows the argv it gives.
	FStackEnv []EnvVar
	// Profile is what the spec's tuning profile set, for display only: Config already holds it.
	Profile []ProfileValue
}

// A Result holds no part of the *Spec it was rendered from, which is shared (the webhook injects
// every pod of a StackInstance generation from one): whoever needs the spec reads the *Spec it
// passed in (Spec.Defaulted), and what a caller does to a Result stays in it.

// clone is a copy of r that shares nothing with it: Spec.Placeholder hands out copies, so no
// caller can change the one the Spec keeps.
func (r *Result) clone() *Result {
	c := *r
	c.Config = slices.Clone(r.Config)
	c.EAL = make([][]string, len(r.EAL))
	for k, argv := range r.EAL {
		c.EAL[k] = slices.Clone(argv)
	}
	c.PortIDs = maps.Clone(r.PortIDs)
	c.ShimEnv = slices.Clone(r.ShimEnv)
	c.ShimEAL = slices.Clone(r.ShimEAL)
	c.CPUs = slices.Clone(r.CPUs)
	c.FStackEnv = slices.Clone(r.FStackEnv)
	c.Profile = slices.Clone(r.Profile)
	return &c
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// ValidationError carries every problem found, each with its field path.
type ValidationError struct{ Errs field.ErrorList }

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid StackInstance: %s", e.Errs.ToAggregate().Error())
}

// PlaceholderFacts stands in for a pod that does not exist yet: consecutive CPUs from 1 (CPU 0
// is left to the node and F-Stack's tools), one device per PCI port, the CNI plugin's socket
// paths, and documentation-range addresses for attachments.
func PlaceholderFacts(spec *Spec) *Facts {
	s := spec.spec
	f := &Facts{PCIResources: map[string][]string{}, Attachments: map[string]Attachment{}}
	// As many CPUs as the injection asks for (fewer than processes with lcoresPerCPU > 1).
	cpus := DataplaneCPUCount(min(int(s.Processes), podcontract.MaxInstances), int(s.DPDK.LcoresPerCPU))
	for i := 0; i < cpus; i++ {
		f.DataplaneCPUs = append(f.DataplaneCPUs, 1+i)
	}
	// The app's CPU after the dataplane's, unless that is beyond what the shim can name: a node
	// may well give the app a low CPU and the dataplane the high ones, so a placeholder must not
	// refuse the spec for it (the supervisor checks the real one).
	app := 1 + cpus
	if app > podcontract.MaxShimLcore {
		app = 0
	}
	f.AppCPUs = []int{app}
	dev := 0
	addDev := func(d *fsv1.PCIDevice) {
		if d.Resource != "" {
			f.PCIResources[d.Resource] = append(f.PCIResources[d.Resource], fmt.Sprintf("0000:00:%02x.%d", 1+dev/8, dev%8))
			dev++
		}
	}
	for i := range s.Ports {
		ps := &s.Ports[i]
		if ps.Device.PCI != nil {
			addDev(ps.Device.PCI)
		}
		if ps.Device.Bond != nil {
			for j := range ps.Device.Bond.Members {
				addDev(&ps.Device.Bond.Members[j])
			}
		}
		f.Attachments[ps.Attachment] = Attachment{
			SocketPath: DefaultPodSocketDir + "/" + podcontract.VhostSocketFile(ps.Attachment),
			// fstack-cni makes OVS the vhost-user client, so the pod's DPDK serves the socket.
			Server:      true,
			IPs:         []string{fmt.Sprintf("192.0.2.%d/24", 10+i), fmt.Sprintf("2001:db8::%x/64", 10+i)},
			Gateways:    []string{"192.0.2.1", "2001:db8::1"},
			Placeholder: true,
		}
	}
	return f
}

// ConfigHash identifies a rendered config; pods record the hash they run.
func ConfigHash(cfg []byte) string {
	sum := sha256.Sum256(cfg)
	return hex.EncodeToString(sum[:8])
}

func (p *plan) shimEnv() []EnvVar {
	if !*p.spec.Shim.Enabled {
		return nil
	}
	return []EnvVar{{Name: podcontract.EnvInstances, Value: strconv.Itoa(len(p.lcores))}}
}

// fstackEnv gives patch 0003 every process's CPU when lcores share CPUs. Always the whole
// list, the same for every process: F-Stack's Nginx forks all its workers from one master with
// one environment, and each picks its own entry by its proc id.
func (p *plan) fstackEnv() []EnvVar {
	if !p.lcoresShareCPUs() {
		return nil
	}
	list := make([]string, len(p.cpus))
	for k, c := range p.cpus {
		list[k] = strconv.Itoa(c)
	}
	return []EnvVar{{Name: podcontract.EnvLcoreCPUs, Value: strings.Join(list, ",")}}
}

// lcoresShareCPUs is the lab option in effect: every process's lcore is pinned with --lcores
// (patch 0003), even when the container happens to have a CPU for each.
func (p *plan) lcoresShareCPUs() bool { return p.spec.DPDK.LcoresPerCPU > 1 }
