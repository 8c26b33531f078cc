package render_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// celCase breaks one CEL rule of the CRD; the renderer must refuse it at path.
type celCase struct {
	mutate func(s map[string]any)
	path   string
}

func port(s map[string]any, i int) map[string]any   { return s["ports"].([]any)[i].(map[string]any) }
func obj(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }

// celCases holds a violation for every CEL rule, keyed by "<schema path> <first words of the
// rule>". A rule added to the API without a case here fails TestRendererEnforcesEveryCELRule.
var celCases = map[string][]celCase{
	"spec !has(self.vlans) || self.vlans.all": {{func(s map[string]any) {
		s["vlans"].([]any)[0].(map[string]any)["port"] = "nope"
	}, "spec.vlans[0].port"}},
	"spec !has(self.rssCheck) || !has(self.rssCheck.entries)": {{func(s map[string]any) {
		obj(s, "rssCheck")["entries"].([]any)[0].(map[string]any)["port"] = "nope"
	}, "spec.rssCheck.entries[0].port"}},
	"spec self.ports.all(p, !has(p.processes)": {{func(s map[string]any) {
		port(s, 0)["processes"] = []any{int64(0), int64(2)}
	}, "spec.ports[0].processes[1]"}, {func(s map[string]any) {
		delete(s, "processes") // defaults to 1
	}, "spec.ports[0].processes[1]"}},
	"spec.dpdk !has(self.noHuge) || !self.noHuge": {{func(s map[string]any) {
		obj(s, "dpdk")["noHuge"] = true
		delete(obj(s, "dpdk"), "memory")
	}, "spec.dpdk.memory"}},
	"spec.kni !self.enabled || has(self.method)": {{func(s map[string]any) {
		delete(obj(s, "kni"), "method")
	}, "spec.kni.method"}},
	"spec.ports[] !has(self.vipInterface) || has(self.vips)": {{func(s map[string]any) {
		delete(port(s, 0), "vips")
		delete(port(s, 0), "vips6")
	}, "spec.ports[0].vipInterface"}},
	"spec.ports[].device (has(self.vhostUser) ? 1 : 0)": {{func(s map[string]any) {
		obj(port(s, 0), "device")["vhostUser"] = map[string]any{}
	}, "spec.ports[0].device"}, {func(s map[string]any) {
		port(s, 0)["device"] = map[string]any{}
	}, "spec.ports[0].device"}},
	"spec.ports[].device.vhostUser.mac !self.matches": {{func(s map[string]any) {
		obj(obj(port(s, 2), "device"), "vhostUser")["mac"] = "01:00:5e:00:00:01"
	}, "spec.ports[2].device.vhostUser.mac"}, {func(s map[string]any) {
		obj(obj(port(s, 2), "device"), "vhostUser")["mac"] = "FF:FF:FF:FF:FF:FF"
	}, "spec.ports[2].device.vhostUser.mac"}},
	"spec.ports[].device.bond.mac !self.matches": {{func(s map[string]any) {
		obj(obj(port(s, 3), "device"), "bond")["mac"] = "33:33:00:00:00:01"
	}, "spec.ports[3].device.bond.mac"}},
	"spec.ports[].device.pci has(self.address) != has(self.resource)": {{func(s map[string]any) {
		obj(obj(port(s, 0), "device"), "pci")["resource"] = "intel.com/vf"
	}, "spec.ports[0].device.pci"}, {func(s map[string]any) {
		obj(port(s, 0), "device")["pci"] = map[string]any{}
	}, "spec.ports[0].device.pci"}},
	"spec.ports[].device.bond.members[] has(self.address) != has(self.resource)": {{func(s map[string]any) {
		obj(obj(port(s, 3), "device"), "bond")["members"].([]any)[0] = map[string]any{}
	}, "spec.ports[3].device.bond.members[0]"}},
	"spec.ports[].ipv4 self.from != 'Static' || has(self.address)": {{func(s map[string]any) {
		delete(obj(port(s, 0), "ipv4"), "address")
	}, "spec.ports[0].ipv4.address"}},
	"spec.ports[].ipv4 self.from == 'Attachment' || has(self.gateway)": {{func(s map[string]any) {
		delete(obj(port(s, 2), "ipv4"), "gateway") // from defaults to Static
	}, "spec.ports[2].ipv4.gateway"}, {func(s map[string]any) {
		delete(obj(port(s, 1), "ipv4"), "gateway")
	}, "spec.ports[1].ipv4.gateway"}},
	"spec.ports[].ipv4 (self.from == 'Pool') == has(self.pool)": {{func(s map[string]any) {
		delete(obj(port(s, 1), "ipv4"), "pool")
	}, "spec.ports[1].ipv4.pool"}, {func(s map[string]any) {
		obj(port(s, 2), "ipv4")["pool"] = map[string]any{"ranges": []any{"10.2.0.20"}, "prefixLength": int64(24)}
	}, "spec.ports[2].ipv4.pool"}},
	"spec.ports[].ipv4 self.from != 'Pool' || !has(self.address)": {{func(s map[string]any) {
		obj(port(s, 1), "ipv4")["address"] = "10.1.0.10/24"
	}, "spec.ports[1].ipv4.address"}},
	"spec.ports[].ipv4 !has(self.pool) || self.pool.prefixLength <= 32": {{func(s map[string]any) {
		obj(obj(port(s, 1), "ipv4"), "pool")["prefixLength"] = int64(64)
	}, "spec.ports[1].ipv4.pool.prefixLength"}},
	"spec.ports[].ipv6 (self.from == 'Pool') == has(self.pool)": {{func(s map[string]any) {
		delete(obj(port(s, 1), "ipv6"), "pool")
	}, "spec.ports[1].ipv6.pool"}, {func(s map[string]any) {
		obj(port(s, 0), "ipv6")["pool"] = map[string]any{"ranges": []any{"2001:db8::20"}, "prefixLength": int64(64)}
	}, "spec.ports[0].ipv6.pool"}},
	"spec.ports[].ipv6 self.from != 'Pool' || !has(self.address)": {{func(s map[string]any) {
		obj(port(s, 1), "ipv6")["address"] = "2001:db8:1::10/64"
	}, "spec.ports[1].ipv6.address"}},
	"spec.vlans[].ipv4 (self.from == 'Pool') == has(self.pool)": {{func(s map[string]any) {
		obj(s["vlans"].([]any)[0].(map[string]any), "ipv4")["pool"] = map[string]any{"ranges": []any{"10.10.0.20"}, "prefixLength": int64(24)}
	}, "spec.vlans[0].ipv4.pool"}},
	"spec.vlans[].ipv4 self.from != 'Pool' || !has(self.address)": {{func(s map[string]any) {
		v := obj(s["vlans"].([]any)[0].(map[string]any), "ipv4")
		v["from"] = "Pool"
		v["pool"] = map[string]any{"ranges": []any{"10.10.0.20"}, "prefixLength": int64(24)}
	}, "spec.vlans[0].ipv4.address"}},
	"spec.vlans[].ipv4 !has(self.pool) || self.pool.prefixLength <= 32": {{func(s map[string]any) {
		obj(s["vlans"].([]any)[0].(map[string]any), "ipv4")["pool"] = map[string]any{"ranges": []any{"10.10.0.20"}, "prefixLength": int64(40)}
	}, "spec.vlans[0].ipv4.pool.prefixLength"}},
	"spec.vlans[].ipv6 (self.from == 'Pool') == has(self.pool)": {{func(s map[string]any) {
		obj(s["vlans"].([]any)[0].(map[string]any), "ipv6")["pool"] = map[string]any{"ranges": []any{"2001:db8:10::20"}, "prefixLength": int64(64)}
	}, "spec.vlans[0].ipv6.pool"}},
	"spec.vlans[].ipv6 self.from != 'Pool' || !has(self.address)": {{func(s map[string]any) {
		v := obj(s["vlans"].([]any)[0].(map[string]any), "ipv6")
		v["from"] = "Pool"
		v["pool"] = map[string]any{"ranges": []any{"2001:db8:10::20"}, "prefixLength": int64(64)}
	}, "spec.vlans[0].ipv6.address"}},
	"spec.ports[].ipv6 self.from != 'Static' || has(self.address)": {{func(s map[string]any) {
		delete(obj(port(s, 0), "ipv6"), "address")
	}, "spec.ports[0].ipv6.address"}},
	"spec.vlans[].ipv4 self.from != 'Static' || has(self.address)": {{func(s map[string]any) {
		delete(obj(s["vlans"].([]any)[0].(map[string]any), "ipv4"), "address")
	}, "spec.vlans[0].ipv4.address"}},
	"spec.vlans[].ipv4 self.from == 'Attachment' || has(self.gateway)": {{func(s map[string]any) {
		delete(obj(s["vlans"].([]any)[0].(map[string]any), "ipv4"), "gateway")
	}, "spec.vlans[0].ipv4.gateway"}},
	"spec.vlans[].ipv6 self.from != 'Static' || has(self.address)": {{func(s map[string]any) {
		delete(obj(s["vlans"].([]any)[0].(map[string]any), "ipv6"), "address")
	}, "spec.vlans[0].ipv6.address"}},
	"spec.rssCheck !has(self.enabled) || !self.enabled || (has(self.entries)": {{func(s map[string]any) {
		delete(obj(s, "rssCheck"), "entries")
	}, "spec.rssCheck.entries"}, {func(s map[string]any) {
		obj(s, "rssCheck")["entries"] = []any{}
	}, "spec.rssCheck.entries"}},
	"spec.freebsd.boot self.all(k, size(k) <= 128": {{func(s map[string]any) {
		obj(obj(s, "freebsd"), "boot")["kern."+strings.Repeat("k", 124)] = "1"
	}, "spec.freebsd.boot"}, {func(s map[string]any) {
		obj(obj(s, "freebsd"), "boot")["kern.ncallout"] = strings.Repeat("1", 257)
	}, "spec.freebsd.boot"}},
	"spec.freebsd.sysctl self.all(k, size(k) <= 128": {{func(s map[string]any) {
		obj(obj(s, "freebsd"), "sysctl")["net."+strings.Repeat("k", 125)] = "1"
	}, "spec.freebsd.sysctl"}, {func(s map[string]any) {
		obj(obj(s, "freebsd"), "sysctl")["net.inet.tcp.msl"] = strings.Repeat("1", 257)
	}, "spec.freebsd.sysctl"}},
	"spec.dpdk.memory type(self) != string || size(self) <= 64": {{func(s map[string]any) {
		obj(s, "dpdk")["memory"] = strings.Repeat("9", 65)
	}, "spec.dpdk.memory"}},
	"spec.freebsd.physMem type(self) != string || size(self) <= 64": {{func(s map[string]any) {
		obj(s, "freebsd")["physMem"] = strings.Repeat("9", 65)
	}, "spec.freebsd.physMem"}},
	"spec.pcap.fileSize type(self) != string || size(self) <= 64": {{func(s map[string]any) {
		obj(s, "pcap")["fileSize"] = strings.Repeat("9", 65)
	}, "spec.pcap.fileSize"}},
	"spec.dataplane.hugePages.amount type(self) != string || size(self) <= 64": {{func(s map[string]any) {
		obj(obj(s, "dataplane"), "hugePages")["amount"] = strings.Repeat("9", 65)
	}, "spec.dataplane.hugePages.amount"}},
	"spec.dataplane.resources !has(self.limits)": {{func(s map[string]any) {
		obj(obj(obj(s, "dataplane"), "resources"), "limits")["example.com/"+strings.Repeat("r", 242)] = "1"
	}, "spec.dataplane.resources.limits"}, {func(s map[string]any) {
		obj(obj(s, "dataplane"), "resources")["limits"] = resourceMap(17)
	}, "spec.dataplane.resources.limits"}, {func(s map[string]any) {
		obj(obj(obj(s, "dataplane"), "resources"), "limits")["cpu"] = strings.Repeat("9", 65)
	}, "spec.dataplane.resources.limits[cpu]"}},
	"spec.dataplane.resources !has(self.requests)": {{func(s map[string]any) {
		obj(obj(obj(s, "dataplane"), "resources"), "requests")["example.com/"+strings.Repeat("r", 242)] = "1"
	}, "spec.dataplane.resources.requests"}, {func(s map[string]any) {
		obj(obj(s, "dataplane"), "resources")["requests"] = resourceMap(17)
	}, "spec.dataplane.resources.requests"}, {func(s map[string]any) {
		obj(obj(obj(s, "dataplane"), "resources"), "requests")["cpu"] = strings.Repeat("9", 65)
	}, "spec.dataplane.resources.requests[cpu]"}},
	"spec.dataplane.resources !has(self.claims)": {{func(s map[string]any) {
		obj(obj(s, "dataplane"), "resources")["claims"] = []any{map[string]any{"name": strings.Repeat("c", 64)}}
	}, "spec.dataplane.resources.claims[0].name"}, {func(s map[string]any) {
		obj(obj(s, "dataplane"), "resources")["claims"] = []any{map[string]any{"name": "c", "request": strings.Repeat("r", 64)}}
	}, "spec.dataplane.resources.claims[0].request"}, {func(s map[string]any) {
		var claims []any
		for i := range 17 {
			claims = append(claims, map[string]any{"name": fmt.Sprintf("c%d", i)})
		}
		obj(obj(s, "dataplane"), "resources")["claims"] = claims
	}, "spec.dataplane.resources.claims"}},
	"spec !has(self.program) || !has(self.shim)": {{func(s map[string]any) {
		s["program"] = map[string]any{"mode": "PerProcess"}
		delete(obj(s, "dataplane"), "image")
	}, "spec.shim"}, {func(s map[string]any) {
		s["program"] = map[string]any{"mode": "Nginx"}
		s["shim"] = map[string]any{"enabled": false, "threadSocket": true}
		delete(obj(s, "dataplane"), "image")
	}, "spec.shim"}},
	"spec !has(self.program) || !has(self.dataplane)": {{func(s map[string]any) {
		s["program"] = map[string]any{"mode": "PerProcess"}
		s["shim"] = map[string]any{"enabled": false}
	}, "spec.dataplane.image"}},
	"spec.shim !(has(self.polling) && self.polling": {{func(s map[string]any) {
		obj(s, "shim")["polling"] = true
		delete(obj(s, "shim"), "kernelEvent") // unset means on
	}, "spec.shim.polling"}, {func(s map[string]any) {
		obj(s, "shim")["polling"] = true
		obj(s, "shim")["kernelEvent"] = true
		obj(s, "shim")["enabled"] = false // the rule holds whether or not the shim is on
	}, "spec.shim.polling"}},
}

// celCoarse are the rules whose API server error names the map or list they bound rather than
// the entry the renderer names: they check every entry at once, and naming the one at fault
// needs CEL's two-variable comprehensions (Kubernetes 1.32; the chart supports 1.30).
var celCoarse = map[string]bool{
	"spec.dataplane.resources !has(self.limits)":   true,
	"spec.dataplane.resources !has(self.requests)": true,
	"spec.dataplane.resources !has(self.claims)":   true,
}

// apiNames says whether the API server's errors name path: at path itself (the rule's fieldPath),
// or, for a rule over a list whose fieldPath cannot hold an index, at the list with the entry's
// path in its message (messageExpression).
func apiNames(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
		if (strings.HasPrefix(path, e.Field+".") || strings.HasPrefix(path, e.Field+"[")) && strings.Contains(e.Detail, path) {
			return true
		}
	}
	return false
}

// TestRendererEnforcesEveryCELRule: each CEL rule of the generated CRD has a case here that the
// API server refuses naming the field to change (apiNames), and the renderer refuses it there.
func TestRendererEnforcesEveryCELRule(t *testing.T) {
	adm := loadAdmission(t)
	base := loadBase(t)
	w := newWalker()
	w.walk(adm.Spec, base, nil, "spec")
	covered := map[string]bool{}
	for spath, rules := range w.cel {
		for _, rule := range rules {
			key, cases := celCaseFor(spath, rule)
			if cases == nil {
				t.Errorf("CEL rule at %s has no case in celCases: %s", spath, rule)
				continue
			}
			covered[key] = true
			for i, c := range cases {
				spec := deepCopy(base).(map[string]any)
				c.mutate(spec)
				spec = normalize(spec)
				errs := adm.admit(spec)
				if len(errs) == 0 {
					t.Errorf("%s case %d: the API server accepts it; the case does not break the rule", key, i)
				} else if !celCoarse[key] && !apiNames(errs, c.path) {
					t.Errorf("%s case %d: the API server does not name %s (the rule's fieldPath, or its messageExpression under the list it points to): %v", key, i, c.path, errs.ToAggregate())
				}
				if errs := render.Validate(decodeSpec(t, spec)); !errorAt(errs, c.path) {
					t.Errorf("%s case %d: the renderer does not refuse it at %s: %v", key, i, c.path, errs.ToAggregate())
				}
			}
		}
	}
	for key := range celCases {
		if !covered[key] {
			t.Errorf("celCases has %q, which matches no CEL rule of the CRD", key)
		}
	}
}

func celCaseFor(spath, rule string) (string, []celCase) {
	for key, cases := range celCases {
		p, prefix, _ := strings.Cut(key, " ")
		if p == spath && strings.HasPrefix(rule, prefix) {
			return key, cases
		}
	}
	return "", nil
}

// The two specs of the report (issue 12), and the two the offline CLI accepted although the API
// server refuses them: each is refused with its field path, without a panic or an allocation
// sized by the value.
func TestHostileSpecsAreRefused(t *testing.T) {
	cases := map[string]struct {
		mutate func(*fsv1.StackInstanceSpec)
		path   string
	}{
		"processes -5":               {func(s *fsv1.StackInstanceSpec) { s.Processes = -5 }, "spec.processes"},
		"processes 2147483647":       {func(s *fsv1.StackInstanceSpec) { s.Processes = 2147483647 }, "spec.processes"},
		"duplicate port names":       {func(s *fsv1.StackInstanceSpec) { s.Ports = append(s.Ports, s.Ports[0]) }, "spec.ports[1]"},
		"pktTxDelayMicroseconds 150": {func(s *fsv1.StackInstanceSpec) { s.DPDK.PktTxDelayMicroseconds = new(int32(150)) }, "spec.dpdk.pktTxDelayMicroseconds"},
		"port process index -1":      {func(s *fsv1.StackInstanceSpec) { s.Ports[0].Processes = []int32{-1} }, "spec.ports[0].processes[0]"},
		// Issue 23: sizes the CRD once left unbounded.
		"1 MiB image": {func(s *fsv1.StackInstanceSpec) {
			s.Dataplane.Image = "registry.example/" + strings.Repeat("x", 1<<20)
		}, "spec.dataplane.image"},
		"65 shim containers": {func(s *fsv1.StackInstanceSpec) {
			for i := range 65 {
				s.Shim.Containers = append(s.Shim.Containers, fmt.Sprintf("c%d", i))
			}
		}, "spec.shim.containers"},
		"shim container name of 64": {func(s *fsv1.StackInstanceSpec) {
			s.Shim.Containers = []string{strings.Repeat("c", 64)}
		}, "spec.shim.containers[0]"},
		"boot name of 129": {func(s *fsv1.StackInstanceSpec) {
			s.FreeBSD.Boot = map[string]string{"kern." + strings.Repeat("k", 124): "1"}
		}, "spec.freebsd.boot"},
		"boot value of 129": {func(s *fsv1.StackInstanceSpec) {
			s.FreeBSD.Boot = map[string]string{"hw.x": strings.Repeat("1", 129)}
		}, "spec.freebsd.boot"},
		"sysctl value of 257": {func(s *fsv1.StackInstanceSpec) {
			s.FreeBSD.Sysctl = map[string]string{"net.inet.tcp.msl": strings.Repeat("1", 257)}
		}, "spec.freebsd.sysctl[net.inet.tcp.msl]"},
		"17 limits": {func(s *fsv1.StackInstanceSpec) {
			s.Dataplane.Resources.Limits = corev1.ResourceList{}
			for i := range 17 {
				s.Dataplane.Resources.Limits[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
			}
		}, "spec.dataplane.resources.limits"},
		"claim request of 64": {func(s *fsv1.StackInstanceSpec) {
			s.Dataplane.Resources.Claims = []corev1.ResourceClaim{{Name: "c", Request: strings.Repeat("r", 64)}}
		}, "spec.dataplane.resources.claims[0].request"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, f := base()
			tc.mutate(s)
			_, err := render.RenderRaw(s, f)
			var ve *render.ValidationError
			if !errors.As(err, &ve) || !errorAt(ve.Errs, tc.path) {
				t.Errorf("Render: want an error at %s, got %v", tc.path, err)
			}
			if errs := render.Validate(s); !errorAt(errs, tc.path) {
				t.Errorf("Validate: want an error at %s, got %v", tc.path, errs.ToAggregate())
			}
		})
	}
}

// A hostile value comes back shortened: the error lands in the dataplane's log and its status.
func TestSchemaErrorsDoNotEchoHugeValues(t *testing.T) {
	s, _ := base()
	huge := strings.Repeat("x", 200000)
	s.DPDK.BaseVirtAddr = huge
	s.Shim.Containers = []string{huge, huge}
	errs := render.CheckSchema(s)
	if len(errs) != 4 { // the prefix, each name too long, the second a duplicate
		t.Fatalf("want 4 errors, got %v", errs)
	}
	if msg := errs.ToAggregate().Error(); len(msg) > 1000 {
		t.Errorf("the error message is %d bytes long", len(msg))
	}
}

// resourceMap is n distinct extended resources of one unit each.
func resourceMap(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("example.com/r%d", i)] = "1"
	}
	return m
}
