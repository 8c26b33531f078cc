package cli

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

type renderOptions struct {
	files               fileFlags
	name, cpus, appCPUs string
	pci, vhost, addr    []string
	eal, explain        bool
	procID              int
}

func newRenderCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &renderOptions{procID: -1}
	cmd := &cobra.Command{
		Use:   "render -f stack.yaml [--cpus 8-11] [--app-cpus 12-15] [--pci RESOURCE=BDF] [--vhost PORT=PATH] [--addr PORT=IP/PREFIX,GW] [--eal [--proc-id N]]",
		Short: "Print the config.ini a pod bound to the StackInstance would run",
		Long: `Render F-Stack's config.ini for a StackInstance, as the dataplane does at pod start.

What only the pod knows is given with flags; anything not given is a placeholder (CPUs from 1,
the CNI plugin's socket paths, documentation addresses), and a note on stderr says which.
With --eal the EAL argv F-Stack builds for each process follows as '#' comment lines, so the
output stays a valid config.ini. When the spec names a tuning profile, a '#' line above each value
the profile set names the profile and the F-Stack document behind the value, or the field that
overrides it (--explain=false: the file exactly as the dataplane writes it). Invalid input prints
every problem with its field path to stderr and exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error { return o.run(stdout, stderr) },
	}
	f := cmd.Flags()
	o.files.add(f, "StackInstance manifests (YAML or JSON; repeatable; a directory's .json, .yaml and .yml files; - for stdin)")
	f.StringVar(&o.name, "name", "", "which StackInstance, when the files hold several")
	f.StringVar(&o.cpus, "cpus", "", "the dataplane container's CPUs, e.g. 8-11")
	f.StringVar(&o.appCPUs, "app-cpus", "", "the app container's CPUs, e.g. 12-15 (checks the first, which the launcher gives the shim)")
	f.StringArrayVar(&o.pci, "pci", nil, "RESOURCE=BDF[,BDF...]: the devices of an SR-IOV resource, as PCIDEVICE_<RESOURCE> lists them (repeat for more)")
	f.StringArrayVar(&o.vhost, "vhost", nil, "PORT=PATH: the vhost-user socket of a port, as the dataplane sees it")
	f.StringArrayVar(&o.addr, "addr", nil, "PORT=IP/PREFIX,GW: the address IPAM gave a port's attachment")
	f.BoolVar(&o.eal, "eal", false, "also print the EAL argv of each process")
	f.IntVar(&o.procID, "proc-id", -1, "with --eal, only this process")
	f.BoolVar(&o.explain, "explain", true, "mark the values the spec's profile set with '#' lines (false: exactly the dataplane's file)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *renderOptions) run(stdout, stderr io.Writer) error {
	si, err := o.load(stderr)
	if err != nil {
		return err
	}
	checked, errs := render.Prepare(&si.Spec)
	if len(errs) > 0 {
		return invalidStack(stderr, si.Name, append(errs, o.cpuErrors(&si.Spec)...))
	}
	facts, notes, err := o.facts(checked, &si.Spec)
	if err != nil {
		return err
	}
	if len(o.addr) > 0 {
		// --addr may have given a pool port its address, which the spec then holds as static.
		if checked, errs = render.Prepare(&si.Spec); len(errs) > 0 {
			return invalidStack(stderr, si.Name, errs)
		}
	}
	notes = append(notes, placeholderNotes(checked.Defaulted(), facts)...)
	res, err := render.Render(checked, facts)
	var ve *render.ValidationError
	if errors.As(err, &ve) {
		return invalidStack(stderr, si.Name, ve.Errs)
	}
	if err != nil {
		return err
	}
	for _, n := range append(notes, unusedProfileNotes(res.Profile)...) {
		fmt.Fprintln(stderr, "note:", n)
	}
	cfg := res.Config
	if o.explain {
		cfg = explainProfile(cfg, res.Profile)
	}
	if _, err := stdout.Write(cfg); err != nil {
		return err
	}
	if err := printProgram(stdout, checked.Defaulted().Program, len(res.EAL)); err != nil {
		return err
	}
	if o.eal {
		return o.printEAL(stdout, res)
	}
	return nil
}

// cpuErrors compares --cpus with the processes a spec that fails its checks asks for, so that its
// problems and the flags' show at once (a valid spec's are the render's).
func (o *renderOptions) cpuErrors(raw *fsv1.StackInstanceSpec) field.ErrorList {
	cpus, err := render.ParseCPUList(o.cpus)
	if o.cpus == "" || err != nil {
		return nil
	}
	procs := max(raw.Processes, 1) // the CRD's default
	if err := render.CheckDataplaneCPUs(cpus, int(procs), int(raw.DPDK.LcoresPerCPU)); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "processes"), procs, err.Error())}
	}
	return nil
}

func invalidStack(stderr io.Writer, name string, errs field.ErrorList) error {
	fmt.Fprintf(stderr, "StackInstance %s is invalid:\n", name)
	for _, e := range errs {
		fmt.Fprintf(stderr, "  %s\n", e.Error())
	}
	return errReported
}

// load reads the chosen StackInstance of the file as the API server would store it (admit).
func (o *renderOptions) load(stderr io.Writer) (*fsv1.StackInstance, error) {
	files, err := o.files.read()
	if err != nil {
		return nil, err
	}
	return loadStack(stderr, files, o.name, "--name")
}

// facts starts from placeholders and replaces each with what the flags say. Each flag's value is
// parsed and checked by the function the dataplane uses for the same fact (package render), so a
// value the dataplane would refuse is refused here in its words.
func (o *renderOptions) facts(checked *render.Spec, spec *fsv1.StackInstanceSpec) (*render.Facts, []string, error) {
	f := render.PlaceholderFacts(checked)
	notes, err := o.cpuFacts(checked, f)
	if err != nil {
		return nil, nil, err
	}
	if err := o.pciFacts(f); err != nil {
		return nil, nil, err
	}
	attOf := attachmentsByPort(checked.Defaulted())
	if err := o.vhostFacts(f, attOf); err != nil {
		return nil, nil, err
	}
	for _, kv := range o.addr {
		if err := setAddr(checked, spec, f, attOf, kv); err != nil {
			return nil, nil, err
		}
	}
	return f, notes, nil
}

// cpuFacts sets the dataplane's CPUs (--cpus) and the app's (--app-cpus).
func (o *renderOptions) cpuFacts(checked *render.Spec, f *render.Facts) ([]string, error) {
	var notes []string
	var err error
	if o.cpus == "" {
		notes = append(notes, fmt.Sprintf("no --cpus: placeholder dataplane CPUs %s", render.FormatCPUList(f.DataplaneCPUs)))
	} else if f.DataplaneCPUs, err = render.ParseCPUList(o.cpus); err != nil {
		return nil, fmt.Errorf("--cpus: %w", err)
	} else if note, err := cpusBeyondProcesses(checked.Defaulted(), o.cpus, f.DataplaneCPUs); err != nil {
		return nil, err
	} else if note != "" {
		notes = append(notes, note)
	}
	// The lcores' CPUs and the app's as the dataplane and the launcher pick them (podcontract's
	// placement); no switch is known offline.
	spec := checked.Defaulted()
	shared := spec.DPDK.CPUPolicy == fsv1.CPUShared
	f.DataplaneCPUs = podcontract.PlaceLcores(f.DataplaneCPUs, render.DataplaneCPUCount(int(spec.Processes), int(spec.DPDK.LcoresPerCPU)), nil, shared)
	if o.appCPUs == "" {
		f.AppCPUs = nil
	} else if f.AppCPUs, err = render.ParseCPUList(o.appCPUs); err != nil {
		return nil, fmt.Errorf("--app-cpus: %w", err)
	} else {
		f.AppCPUs, _ = podcontract.AppCPUs(f.AppCPUs, &podcontract.Placement{LcoreCPUs: f.DataplaneCPUs})
	}
	return notes, nil
}

// pciFacts sets the devices of the SR-IOV resources (--pci).
func (o *renderOptions) pciFacts(f *render.Facts) error {
	if len(o.pci) == 0 {
		return nil
	}
	f.PCIResources = map[string][]string{}
	for _, kv := range o.pci {
		res, list, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--pci %q: want RESOURCE=BDF[,BDF...]", kv)
		}
		devs, err := render.ParsePCIDevices(list)
		if err != nil {
			return fmt.Errorf("--pci %q: %w", kv, err)
		}
		f.PCIResources[res] = append(f.PCIResources[res], devs...)
	}
	return nil
}

// vhostFacts sets the vhost-user sockets of the ports (--vhost).
func (o *renderOptions) vhostFacts(f *render.Facts, attOf map[string]string) error {
	for _, kv := range o.vhost {
		port, path, ok := strings.Cut(kv, "=")
		att, known := attOf[port]
		if !ok || !known {
			return fmt.Errorf("--vhost %q: want PORT=PATH with PORT one of the spec's ports", kv)
		}
		// fstack-cni's OVS port is the client, so the pod's DPDK is the socket's server.
		a, err := render.AttachmentOf(&podcontract.DevInfo{Type: podcontract.DevInfoTypeVhostUser,
			VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: path}})
		if err != nil {
			return fmt.Errorf("--vhost %q: %w", kv, err)
		}
		old := f.Attachments[att]
		old.SocketPath, old.Server, old.Placeholder = a.SocketPath, a.Server, false
		f.Attachments[att] = old
	}
	return nil
}

// setAddr sets the address of a port: for a port from: Attachment what IPAM gave it, for a port
// from: Pool the one the pod took from the pool, which the spec then holds as static, as the
// injection writes it in the pod's spec snapshot.
func setAddr(checked *render.Spec, spec *fsv1.StackInstanceSpec, f *render.Facts, attOf map[string]string, kv string) error {
	port, val, ok := strings.Cut(kv, "=")
	att, known := attOf[port]
	cidr, gw, hasGW := strings.Cut(val, ",")
	if !ok || !known || !hasGW {
		return fmt.Errorf("--addr %q: want PORT=IP/PREFIX,GW with PORT one of the spec's ports", kv)
	}
	if err := render.CheckAttachmentAddrs([]string{cidr}, []string{gw}); err != nil {
		return fmt.Errorf("--addr %q: %w", kv, err)
	}
	if done, err := setPoolAddr(checked, spec, port, cidr, gw); done || err != nil {
		if err != nil {
			return fmt.Errorf("--addr %q: %w", kv, err)
		}
		return nil
	}
	a := f.Attachments[att]
	a.IPs, a.Gateways, a.Placeholder = []string{cidr}, []string{gw}, false
	f.Attachments[att] = a
	return nil
}

// setPoolAddr gives port the address cidr from its pool of cidr's family (the checked spec's,
// parsed) in spec; done is false when that address of the port is not from a pool.
func setPoolAddr(checked *render.Spec, spec *fsv1.StackInstanceSpec, port, cidr, gw string) (done bool, err error) {
	pfx, _ := netip.ParsePrefix(cidr)
	v4 := pfx.Addr().Is4()
	i := slices.IndexFunc(spec.Ports, func(p fsv1.PortSpec) bool { return p.Name == port })
	if i < 0 {
		return false, nil
	}
	ps := &spec.Ports[i]
	from, family, sgw := fsv1.AddressSource(""), "ipv6", ""
	if v4 && ps.IPv4 != nil {
		from, family, sgw = ps.IPv4.From, "ipv4", ps.IPv4.Gateway
	} else if !v4 && ps.IPv6 != nil {
		from, sgw = ps.IPv6.From, ps.IPv6.Gateway
	}
	// An earlier --addr of the same port and family has made it static already.
	p := checked.Pool(i, v4)
	if from != fsv1.AddressPool || p == nil {
		return false, nil
	}
	path := field.NewPath("spec", "ports").Index(i).Child(family)
	switch {
	case !p.Contains(pfx.Addr()):
		return true, fmt.Errorf("%s is not an address of the port's pool (%s)", pfx.Addr(), path.Child("pool"))
	case pfx.Bits() != p.Bits:
		return true, fmt.Errorf("the pool's prefix length is %d, not %d", p.Bits, pfx.Bits())
	case sgw != "" && sgw != gw:
		return true, fmt.Errorf("the port's gateway is %s (%s), not %s", sgw, path.Child("gateway"), gw)
	}
	if !v4 {
		ps.IPv6.Gateway = gw
	}
	// As the injection writes the pod's snapshot: the pool port holds its address as static.
	snapshot.PinAddress(spec, i, pfx)
	return true, nil
}

func attachmentsByPort(spec *fsv1.StackInstanceSpec) map[string]string {
	m := map[string]string{}
	for _, p := range spec.Ports {
		m[p.Name] = p.Attachment
	}
	return m
}

func placeholderNotes(spec *fsv1.StackInstanceSpec, f *render.Facts) []string {
	var notes []string
	for _, p := range spec.Ports {
		if (p.IPv4 != nil && p.IPv4.From == fsv1.AddressPool) || (p.IPv6 != nil && p.IPv6.From == fsv1.AddressPool) {
			notes = append(notes, fmt.Sprintf("port %s: placeholder address, the pool's first; each pod takes its own (--addr to set one)", p.Name))
		}
		a := f.Attachments[p.Attachment]
		if !a.Placeholder {
			continue
		}
		if p.Device.VhostUser != nil {
			notes = append(notes, fmt.Sprintf("port %s: socket path %s is the CNI plugin's default (--vhost to set)", p.Name, a.SocketPath))
		}
		if (p.IPv4 != nil && p.IPv4.From == fsv1.AddressAttachment) || (p.IPv6 != nil && p.IPv6.From == fsv1.AddressAttachment) {
			notes = append(notes, fmt.Sprintf("port %s: placeholder attachment address %s (--addr to set)", p.Name, strings.Join(a.IPs, ", ")))
		}
	}
	return notes
}

func (o *renderOptions) printEAL(w io.Writer, res *render.Result) error {
	if o.procID >= len(res.EAL) {
		return fmt.Errorf("--proc-id %d: the stack has %d processes", o.procID, len(res.EAL))
	}
	for k, argv := range res.EAL {
		if o.procID < 0 || o.procID == k {
			if _, err := fmt.Fprintf(w, "# eal proc %s: %s\n", strconv.Itoa(k), strings.Join(argv, " ")); err != nil {
				return err
			}
		}
	}
	// spec.dpdk.lcoresPerCPU (lab only): the --lcores above come from this variable.
	for _, e := range res.FStackEnv {
		if _, err := fmt.Fprintf(w, "# fstack env (lab: lcores share CPUs): %s=%s\n", e.Name, e.Value); err != nil {
			return err
		}
	}
	return nil
}

// printProgram says, as comment lines, how the processes of a stack with spec.program are
// started: the program is the pod's, so only its shape is known here.
func printProgram(w io.Writer, pr *fsv1.ProgramSpec, n int) error {
	if pr == nil {
		return nil
	}
	var err error
	switch pr.Mode {
	case fsv1.ProgramNginx:
		_, err = fmt.Fprintf(w, "# program Nginx: F-Stack's Nginx master, <nginx> -c <nginx.conf>, with -g \"worker_processes %d; fstack_conf %s; daemon off; user root;\" for what the file leaves out; worker k is F-Stack process k (0 the primary)\n", n, programConfigFile)
	default:
		for k := range n {
			if _, err = fmt.Fprintf(w, "# program PerProcess: process %d is <command> <args> --conf %s --proc-type=%s --proc-id=%d\n", k, programConfigFile, render.ProcType(k), k); err != nil {
				break
			}
		}
	}
	return err
}

// programConfigFile is where the supervisor writes config.ini in the dataplane container.
const programConfigFile = "/etc/f-stack/config.ini"

// cpusBeyondProcesses refuses --cpus with more CPUs than the dataplane container of a pod of spec
// has: the injection asks for exactly that many exclusive CPUs, so more is no pod that can exist,
// and the renderer (which the dataplane runs, and which must accept a Shared pool) would silently
// take the first ones. With cpuPolicy Shared the container's cpuset is the node's shared pool,
// larger than the processes: a note then says which CPUs the processes run on.
func cpusBeyondProcesses(spec *fsv1.StackInstanceSpec, flag string, cpus []int) (string, error) {
	procs := int(spec.Processes)
	perCPU := max(int(spec.DPDK.LcoresPerCPU), 1)
	need := render.DataplaneCPUCount(procs, perCPU)
	if len(cpus) <= need {
		return "", nil
	}
	if spec.DPDK.CPUPolicy == fsv1.CPUShared {
		return fmt.Sprintf("cpuPolicy Shared: the dataplane's cpuset is the node's shared pool, and its %d processes run on its highest CPUs %s (the app takes the others first)",
			procs, render.FormatCPUList(podcontract.PlaceLcores(cpus, need, nil, true))), nil
	}
	why := fmt.Sprintf("spec.processes is %d, one exclusive CPU each", procs)
	if perCPU > 1 {
		why = fmt.Sprintf("spec.processes is %d, %d per CPU (spec.dpdk.lcoresPerCPU)", procs, perCPU)
	}
	return "", fmt.Errorf("--cpus %s gives %d CPUs, but the dataplane container of a pod of this StackInstance has exactly %d (%s): "+
		"give the CPUs the container has, e.g. --cpus %s, or raise spec.processes", flag, len(cpus), need, why, render.FormatCPUList(cpus[:need]))
}
