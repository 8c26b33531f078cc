package render

import (
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// CheckSchema enforces every bound and rule of the StackInstance CRD (the OpenAPI schema and the
// CEL rules generated from api/v1alpha1's markers) on a spec that may never have passed the API
// server: the pod's kubefstack.io/spec annotation, which anyone who may edit the pod can change
// after admission, or a file given to the CLI. Render runs it first and stops on any error, so
// nothing later allocates or indexes by an unchecked number. Paths are those the API server
// reports, except for CEL rules, which name the field to change rather than the object holding
// the rule. schema_test.go walks the generated CRD so that a bound added there without a check
// here fails the tests.
func CheckSchema(s *fsv1.StackInstanceSpec) field.ErrorList {
	c := &bounds{}
	root := field.NewPath("spec")
	c.enum(root.Child("fstackVersion"), string(s.FStackVersion), string(fsv1.FStackV125), string(fsv1.FStackV124))
	c.nonZeroIn(root.Child("processes"), int64(s.Processes), 1, maxProcesses)
	c.enum(root.Child("profile"), string(s.Profile), string(fsv1.ProfileLongConnections), string(fsv1.ProfileShortConnections), string(fsv1.ProfileProxy))
	c.dpdk(&s.DPDK, root.Child("dpdk"))
	c.ports(s, root.Child("ports"))
	c.vlans(s.VLANs, root.Child("vlans"))
	c.kni(s.KNI, root.Child("kni"))
	c.freebsd(&s.FreeBSD, root.Child("freebsd"))
	c.rssCheck(s, root.Child("rssCheck"))
	c.pcap(s.Pcap, root.Child("pcap"))
	c.shim(&s.Shim, root.Child("shim"))
	c.dataplane(&s.Dataplane, root.Child("dataplane"))
	c.program(s, root)
	return c.errs
}

// maxProcesses is spec.processes' maximum: one F-Stack process per exclusive CPU.
const maxProcesses = 64

// The CRD's size bounds (api/v1alpha1 says why each is one no real spec reaches).
const (
	maxPortName       = 32
	maxImage          = 1024
	maxShimContainers = 64
	maxDNSLabel       = 63
	maxTunables       = 256
	maxTunableName    = 128
	maxTunableValue   = 256
	maxBootValue      = 128
	maxResources      = 16
	maxResourceName   = 253
	maxQuantity       = 64
)

// The schema's patterns, verbatim (the API server evaluates them with Go's regexp too).
var (
	reBaseVirtAddr = regexp.MustCompile(`^0x[0-9a-fA-F]{1,16}$`)
	reFilePrefix   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	reNoSpaceSemi  = regexp.MustCompile(`^[^\s;]+$`)
	reTunableWord  = regexp.MustCompile(`^[a-z0-9_]+$`)
	rePortRange    = regexp.MustCompile(`^[0-9]{1,5}(-[0-9]{1,5})?$`)
	rePcapDir      = regexp.MustCompile(`^/[^\s;]*$`)
	rePortName     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reDNSLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reIfName       = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	reMAC          = regexp.MustCompile(`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`)
	rePCIAddress   = regexp.MustCompile(`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)
	rePCIResource  = regexp.MustCompile(`^[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+$`)
)

func (c *bounds) dpdk(d *fsv1.DPDKSpec, p *field.Path) {
	c.nonZeroIn(p.Child("channels"), int64(d.Channels), 1, 32)
	c.in(p.Child("idleSleepMicroseconds"), int64(d.IdleSleepMicroseconds), 0, 1000000)
	if d.PktTxDelayMicroseconds != nil {
		c.in(p.Child("pktTxDelayMicroseconds"), int64(*d.PktTxDelayMicroseconds), 0, 100)
	}
	c.str(p.Child("baseVirtAddr"), d.BaseVirtAddr, 0, reBaseVirtAddr)
	c.str(p.Child("filePrefix"), d.FilePrefix, 32, reFilePrefix)
	c.quantity(p.Child("memory"), d.Memory)
	c.in(p.Child("logLevel"), int64(d.LogLevel), 0, 8)
	c.in(p.Child("fstackLogLevel"), int64(d.FStackLogLevel), 0, 8)
	c.str(p.Child("fstackLogFilePrefix"), d.FStackLogFilePrefix, 200, reNoSpaceSemi)
	if d.NoHuge && d.Memory == nil {
		c.add(field.Required(p.Child("memory"), "noHuge needs memory: without hugepages DPDK allocates exactly that much ordinary memory"))
	}
}

func (c *bounds) vlans(list []fsv1.VLANSpec, p *field.Path) {
	c.count(p, len(list), false, 0, 128)
	ids := make([]int32, len(list))
	for i := range list {
		v, vp := &list[i], p.Index(i)
		ids[i] = v.ID
		c.in(vp.Child("id"), int64(v.ID), 1, 4094)
		c.required(vp.Child("port"), v.Port, maxPortName, nil)
		c.addressing(&v.Addressing, vp)
	}
	noDuplicates(c, p, ids)
}

func (c *bounds) kni(k *fsv1.KNISpec, p *field.Path) {
	if k == nil {
		return
	}
	c.enum(p.Child("method"), string(k.Method), string(fsv1.KNIAccept), string(fsv1.KNIReject))
	if k.Enabled && k.Method == "" {
		c.add(field.Required(p.Child("method"), "method is required when the exception path is enabled"))
	}
	c.strings(p.Child("tcpPorts"), k.TCPPorts, 128, 0, rePortRange, false)
	c.strings(p.Child("udpPorts"), k.UDPPorts, 128, 0, rePortRange, false)
	c.enum(p.Child("action"), string(k.Action), string(fsv1.KNIActionDefault), string(fsv1.KNIActionAllToKernel), string(fsv1.KNIActionAllToFStack))
	c.atLeast(p.Child("consolePacketsRateLimit"), int64(k.ConsolePacketsRateLimit), 0)
	c.atLeast(p.Child("generalPacketsRateLimit"), int64(k.GeneralPacketsRateLimit), 0)
	c.atLeast(p.Child("kernelPacketsRateLimit"), int64(k.KernelPacketsRateLimit), 0)
}

func (c *bounds) freebsd(fb *fsv1.FreeBSDSpec, p *field.Path) {
	c.optAtLeast(p.Child("hz"), fb.HZ, 1)
	c.quantity(p.Child("physMem"), fb.PhysMem)
	c.optAtLeast(p.Child("fdReserve"), fb.FDReserve, 0)
	c.optAtLeast(p.Child("maxFiles"), fb.MaxFiles, 1)
	c.optAtLeast(p.Child("soMaxConn"), fb.SoMaxConn, 1)
	c.optAtLeast(p.Child("tcbHashSize"), fb.TCBHashSize, 1)
	c.optAtLeast(p.Child("syncacheHashSize"), fb.SyncacheHashSize, 1)
	c.str(p.Child("congestionControl"), fb.CongestionControl, 32, reTunableWord)
	c.str(p.Child("functionsDefault"), fb.FunctionsDefault, 32, reTunableWord)
	c.optAtLeast(p.Child("portRangeRandomTime"), fb.PortRangeRandomTime, 0)
	c.optAtLeast(p.Child("finWait2TimeoutMilliseconds"), fb.FinWait2TimeoutMilliseconds, 0)
	c.optAtLeast(p.Child("maxTCPTimeWait"), fb.MaxTCPTimeWait, 0)
	c.tunables(p.Child("boot"), fb.Boot, maxBootValue)
	c.tunables(p.Child("sysctl"), fb.Sysctl, maxTunableValue)
}

func (c *bounds) rssCheck(s *fsv1.StackInstanceSpec, p *field.Path) {
	r := s.RSSCheck
	if r == nil {
		return
	}
	ep := p.Child("entries")
	c.count(ep, len(r.Entries), false, 0, 64)
	if r.Enabled != nil && *r.Enabled && len(r.Entries) == 0 {
		c.add(field.Required(ep, "an enabled rssCheck needs entries"))
	}
	for i := range r.Entries {
		e, p := &r.Entries[i], ep.Index(i)
		c.required(p.Child("port"), e.Port, maxPortName, nil)
		if e.Port != "" && !hasPort(s, e.Port) {
			c.add(field.NotFound(p.Child("port"), e.Port))
		}
		c.required(p.Child("localAddress"), e.LocalAddress, 15, nil)
		c.required(p.Child("remoteAddress"), e.RemoteAddress, 15, nil)
		c.in(p.Child("remotePort"), int64(e.RemotePort), 1, 65535)
	}
}

func (c *bounds) pcap(pc *fsv1.PcapSpec, p *field.Path) {
	if pc == nil {
		return
	}
	c.nonZeroIn(p.Child("snapLength"), int64(pc.SnapLength), 94, 65535)
	c.str(p.Child("directory"), pc.Directory, 40, rePcapDir)
	c.quantity(p.Child("fileSize"), pc.FileSize)
}

func (c *bounds) shim(sh *fsv1.ShimSpec, p *field.Path) {
	if sh.Polling && (sh.KernelEvent == nil || *sh.KernelEvent) {
		c.add(field.Invalid(p.Child("polling"), true,
			"polling and kernelEvent cannot be combined (polling is silently disabled with kernelEvent): set kernelEvent=false or polling=false"))
	}
	c.strings(p.Child("containers"), sh.Containers, maxShimContainers, maxDNSLabel, nil, true)
}

func (c *bounds) dataplane(d *fsv1.DataplaneSpec, p *field.Path) {
	c.enum(p.Child("flavor"), string(d.Flavor), string(fsv1.FlavorKubeFStack), string(fsv1.FlavorUpstream))
	c.enum(p.Child("hugePages", "pageSize"), string(d.HugePages.PageSize), string(fsv1.HugePages2Mi), string(fsv1.HugePages1Gi))
	c.str(p.Child("image"), d.Image, maxImage, nil)
	c.quantity(p.Child("hugePages", "amount"), d.HugePages.Amount)
	c.resources(&d.Resources, p.Child("resources"))
}

func hasPort(s *fsv1.StackInstanceSpec, name string) bool {
	for i := range s.Ports {
		if s.Ports[i].Name == name {
			return true
		}
	}
	return false
}

// processCount is spec.processes as the API server's default leaves it for the CEL rules.
func processCount(s *fsv1.StackInstanceSpec) int32 {
	if s.Processes == 0 {
		return 1
	}
	return s.Processes
}
