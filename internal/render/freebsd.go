package render

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

type kv struct {
	key, value string
	path       *field.Path
}

// shippedBoot and shippedSysctl are the active keys of F-Stack v1.25's shipped config.ini, in its
// order. Users expect F-Stack's behaviour, so they are the base every spec overrides.
var shippedBoot = []kv{
	{key: "hz", value: "100"},
	{key: "fd_reserve", value: "1024"},
	{key: "kern.ipc.maxsockets", value: "262144"},
	{key: "net.inet.tcp.syncache.hashsize", value: "4096"},
	{key: "net.inet.tcp.syncache.bucketlimit", value: "100"},
	{key: "net.inet.tcp.tcbhashsize", value: "65536"},
	{key: "kern.ncallout", value: "262144"},
	{key: "kern.features.inet6", value: "1"},
}

var shippedSysctl = []kv{
	{key: "kern.ipc.somaxconn", value: "32768"},
	{key: "kern.ipc.maxsockbuf", value: "16777216"},
	{key: "net.add_addr_allfibs", value: "1"},
	{key: "net.link.ether.inet.maxhold", value: "5"},
	{key: "net.inet.tcp.fast_finwait2_recycle", value: "1"},
	{key: "net.inet.tcp.finwait2_timeout", value: "5000"},
	{key: "net.inet.tcp.maxtcptw", value: "128"},
	{key: "net.inet.tcp.sendspace", value: "16384"},
	{key: "net.inet.tcp.recvspace", value: "8192"},
	{key: "net.inet.tcp.cc.algorithm", value: "cubic"},
	{key: "net.inet.tcp.sendbuf_max", value: "16777216"},
	{key: "net.inet.tcp.recvbuf_max", value: "16777216"},
	{key: "net.inet.tcp.sendbuf_auto", value: "1"},
	{key: "net.inet.tcp.recvbuf_auto", value: "1"},
	{key: "net.inet.tcp.sendbuf_inc", value: "16384"},
	{key: "net.inet.tcp.sack.enable", value: "1"},
	{key: "net.inet.tcp.blackhole", value: "1"},
	{key: "net.inet.tcp.msl", value: "2000"},
	{key: "net.inet.tcp.delayed_ack", value: "1"},
	{key: "net.inet.tcp.rfc1323", value: "1"},
	{key: "net.inet.udp.blackhole", value: "1"},
	{key: "net.inet.ip.redirect", value: "0"},
	{key: "net.inet.ip.forwarding", value: "0"},
	{key: "net.inet.ip.portrange.randomized", value: "1"},
	{key: "net.inet.ip.portrange.randomtime", value: "0"},
	{key: "net.inet6.ip6.auto_linklocal", value: "1"},
	{key: "net.inet6.ip6.accept_rtadv", value: "2"},
	{key: "net.inet6.icmp6.rediraccept", value: "1"},
	{key: "net.inet6.ip6.forwarding", value: "0"},
	{key: "net.inet.tcp.functions_default", value: "freebsd"},
	{key: "net.inet.tcp.hpts.skip_swi", value: "1"},
	{key: "net.inet.tcp.hpts.minsleep", value: "250"},
	{key: "net.inet.tcp.hpts.maxsleep", value: "51200"},
}

// bootOnly are tunables FreeBSD reads once at boot: as run-time sysctls they fail (and F-Stack
// only logs that).
var bootOnly = map[string]bool{
	"hz": true, "physmem": true, "fd_reserve": true, "memsz_MB": true, "kern.maxfiles": true,
	"kern.ipc.maxsockets": true, "kern.ncallout": true, "net.inet.tcp.tcbhashsize": true,
	"net.inet.tcp.syncache.hashsize": true, "net.inet.tcp.syncache.bucketlimit": true,
}

// powerOfTwo are tunables FreeBSD clips or resets (with only a warning) unless a power of two.
var powerOfTwo = map[string]bool{"net.inet.tcp.tcbhashsize": true, "net.inet.tcp.syncache.hashsize": true}

// maxKernelEventFiles is the shim's F-Stack fd -> kernel epoll fd map size (FF_KERNEL_EVENT).
const maxKernelEventFiles = 65536

var sysctlKey = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.]*$`)

// freebsdSections returns [freebsd.boot] and [freebsd.sysctl] as ordered key/values: F-Stack's
// shipped values, with typed fields and map entries applied in place, new keys appended sorted.
func freebsdSections(s *fsv1.StackInstanceSpec) (boot, sysctl []kv, errs field.ErrorList) {
	fb := &s.FreeBSD
	path := field.NewPath("spec", "freebsd")
	typedBoot, typedSysctl := typedFreeBSD(fb, path)
	if *s.Shim.Enabled && *s.Shim.KernelEvent {
		if _, set := findKV(typedBoot, "kern.maxfiles"); !set && fb.Boot["kern.maxfiles"] == "" {
			typedBoot = append(typedBoot, kv{key: "kern.maxfiles", value: strconv.Itoa(maxKernelEventFiles),
				path: field.NewPath("spec", "shim", "kernelEvent")})
		}
	}
	owner := map[string]*field.Path{}
	for _, e := range append(append([]kv{}, typedBoot...), typedSysctl...) {
		owner[e.key] = e.path
	}
	mb, e1 := mapKVs(fb.Boot, path.Child("boot"), owner, false)
	ms, e2 := mapKVs(fb.Sysctl, path.Child("sysctl"), owner, true)
	errs = append(append(errs, e1...), e2...)
	// The profile sits between F-Stack's shipped values and the spec's own, which win.
	profBoot, profSysctl := profileFreeBSD(s)
	boot = merge(merge(shippedBoot, profBoot), append(typedBoot, mb...))
	sysctl = merge(merge(shippedSysctl, profSysctl), append(typedSysctl, ms...))
	errs = append(errs, checkTunables(s, boot)...)
	return boot, sysctl, errs
}

func typedFreeBSD(fb *fsv1.FreeBSDSpec, path *field.Path) (boot, sysctl []kv) {
	i32 := func(out *[]kv, key string, v *int32, name string) {
		if v != nil {
			*out = append(*out, kv{key: key, value: strconv.Itoa(int(*v)), path: path.Child(name)})
		}
	}
	b := func(out *[]kv, key string, v *bool, name string) {
		if v != nil {
			*out = append(*out, kv{key: key, value: boolDigit(*v), path: path.Child(name)})
		}
	}
	str := func(out *[]kv, key, v, name string) {
		if v != "" {
			*out = append(*out, kv{key: key, value: v, path: path.Child(name)})
		}
	}
	i32(&boot, "hz", fb.HZ, "hz")
	if fb.PhysMem != nil {
		boot = append(boot, kv{key: "physmem", value: strconv.FormatInt(fb.PhysMem.Value(), 10), path: path.Child("physMem")})
	}
	i32(&boot, "fd_reserve", fb.FDReserve, "fdReserve")
	i32(&boot, "kern.maxfiles", fb.MaxFiles, "maxFiles")
	i32(&boot, "net.inet.tcp.tcbhashsize", fb.TCBHashSize, "tcbHashSize")
	i32(&boot, "net.inet.tcp.syncache.hashsize", fb.SyncacheHashSize, "syncacheHashSize")
	i32(&sysctl, "kern.ipc.somaxconn", fb.SoMaxConn, "soMaxConn")
	b(&sysctl, "net.inet.tcp.delayed_ack", fb.DelayedAck, "delayedAck")
	str(&sysctl, "net.inet.tcp.cc.algorithm", fb.CongestionControl, "congestionControl")
	str(&sysctl, "net.inet.tcp.functions_default", fb.FunctionsDefault, "functionsDefault")
	b(&sysctl, "net.inet.ip.portrange.randomized", fb.PortRangeRandomized, "portRangeRandomized")
	i32(&sysctl, "net.inet.ip.portrange.randomtime", fb.PortRangeRandomTime, "portRangeRandomTime")
	b(&sysctl, "net.inet.tcp.fast_finwait2_recycle", fb.FastFinWait2Recycle, "fastFinWait2Recycle")
	i32(&sysctl, "net.inet.tcp.finwait2_timeout", fb.FinWait2TimeoutMilliseconds, "finWait2TimeoutMilliseconds")
	i32(&sysctl, "net.inet.tcp.maxtcptw", fb.MaxTCPTimeWait, "maxTCPTimeWait")
	return boot, sysctl
}

// mapKVs validates the free-form map entries and returns them sorted by key.
func mapKVs(m map[string]string, path *field.Path, owner map[string]*field.Path, isSysctl bool) ([]kv, field.ErrorList) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []kv
	var errs field.ErrorList
	for _, k := range keys {
		p := path.Key(k)
		switch {
		case !sysctlKey.MatchString(k):
			errs = append(errs, field.Invalid(p, k, "must be a FreeBSD tunable name of letters, digits, '_' and '.'"))
		case isSysctl && bootOnly[k]:
			errs = append(errs, field.Invalid(p, k, "is a boot-time tunable that FreeBSD reads once: set it in spec.freebsd.boot"))
		case owner[k] != nil:
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s is already set by %s: set it in one place", k, owner[k])))
		default:
			if why := safeValue(m[k]); why != "" {
				errs = append(errs, field.Invalid(p, m[k], why))
				continue
			}
			owner[k] = p
			out = append(out, kv{key: k, value: m[k], path: p})
		}
	}
	return out, errs
}

func checkTunables(s *fsv1.StackInstanceSpec, boot []kv) field.ErrorList {
	var errs field.ErrorList
	for _, e := range boot {
		path := e.path
		if path == nil {
			path = field.NewPath("spec", "freebsd", "boot").Key(e.key)
		}
		n, err := strconv.ParseInt(e.value, 10, 64)
		if powerOfTwo[e.key] && (err != nil || n <= 0 || n&(n-1) != 0) {
			errs = append(errs, field.Invalid(path, e.value, "must be a power of two (FreeBSD silently clips or resets it otherwise)"))
		}
		if e.key == "kern.maxfiles" && *s.Shim.Enabled && *s.Shim.KernelEvent && (err != nil || n > maxKernelEventFiles) {
			errs = append(errs, field.Invalid(path, e.value, fmt.Sprintf(
				"the kernelEvent shim maps F-Stack descriptors into a %d-entry table: kern.maxfiles must be at most %d",
				maxKernelEventFiles, maxKernelEventFiles)))
		}
	}
	return errs
}

// merge applies overrides to base in place and appends new keys in the given order.
func merge(base, overrides []kv) []kv {
	out := append([]kv(nil), base...)
	idx := map[string]int{}
	for i, e := range out {
		idx[e.key] = i
	}
	for _, o := range overrides {
		if i, ok := idx[o.key]; ok {
			out[i] = o
			continue
		}
		idx[o.key] = len(out)
		out = append(out, o)
	}
	return out
}

func findKV(list []kv, key string) (kv, bool) {
	for _, e := range list {
		if e.key == key {
			return e, true
		}
	}
	return kv{}, false
}
