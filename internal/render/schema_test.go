package render_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/crdschema"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The API server's side: the generated CRD evaluated with kube-apiserver's own libraries.
type admission struct{ *crdschema.Admission }

func loadAdmission(t *testing.T) *admission { return &admission{fixtures.CRD(t)} }

// admit defaults and validates a copy of spec as the API server does on create.
func (a *admission) admit(spec map[string]any) field.ErrorList {
	return a.Admit(map[string]any{
		"apiVersion": "kubefstack.io/v1alpha1", "kind": "StackInstance",
		"metadata": map[string]any{"name": "x", "namespace": "d"}, "spec": deepCopy(spec),
	})
}

// baseSpec sets every field that has a bound, so that each bound has a value to vary.
const baseSpec = `
fstackVersion: v1.25
processes: 2
dpdk: {channels: 4, memory: 512Mi, baseVirtAddr: "0x7f0000000000", filePrefix: pfx, logLevel: 1,
  fstackLogLevel: 1, fstackLogFilePrefix: /var/log/f, idleSleepMicroseconds: 10, pktTxDelayMicroseconds: 50}
ports:
- name: p0
  attachment: net1
  ifName: eth0
  vipInterface: lo0
  processes: [0, 1]
  device: {pci: {address: "0000:3b:00.0"}}
  ipv4: {from: Static, address: 10.0.0.10/24, gateway: 10.0.0.1, broadcast: 10.0.0.255}
  ipv6: {from: Static, address: "2001:db8::10/64", gateway: "2001:db8::1"}
  vips: [172.16.0.1]
  vips6: ["2001:db8:ff::1"]
  vipPrefixLength: 64
  policyRoutes: [10.1.0.0/16]
- name: p1
  device: {pci: {resource: intel.com/vf}}
  ipv4: {from: Pool, pool: {ranges: [10.1.0.10-10.1.0.20, 10.1.0.30], prefixLength: 24}, gateway: 10.1.0.1}
  ipv6: {from: Pool, pool: {ranges: ["2001:db8:1::10-2001:db8:1::20"], prefixLength: 64}}
- name: p2
  network: {name: fstack-net, namespace: demo}
  device: {vhostUser: {queues: 2, queueSize: 256, mac: "02:00:00:00:00:01", controlQueue: true}}
  ipv4: {address: 10.2.0.10/24, gateway: 10.2.0.1}
- name: p3
  device: {bond: {mode: 1, members: [{address: "0000:3c:00.0"}, {resource: intel.com/vf}], primaryMember: 0,
    mac: "02:00:00:00:00:02", xmitPolicy: l23, socketID: 1}}
  ipv4: {address: 10.3.0.10/24, gateway: 10.3.0.1}
vlans:
- id: 10
  port: p0
  ipv4: {from: Static, address: 10.10.0.2/24, gateway: 10.10.0.1, broadcast: 10.10.0.255}
  ipv6: {from: Static, address: "2001:db8:10::2/64", gateway: "2001:db8:10::1"}
  vips: [100.64.0.1]
  vips6: ["2001:db8:64::1"]
  vipPrefixLength: 64
  policyRoutes: [10.11.0.0/16]
kni: {enabled: true, method: Reject, tcpPorts: ["80"], udpPorts: ["53"], action: Default,
  consolePacketsRateLimit: 1, generalPacketsRateLimit: 1, kernelPacketsRateLimit: 1}
freebsd: {hz: 100, physMem: 1Gi, fdReserve: 1024, maxFiles: 1024, soMaxConn: 1024, tcbHashSize: 1024,
  syncacheHashSize: 1024, delayedAck: true, congestionControl: cubic, functionsDefault: freebsd,
  portRangeRandomized: true, portRangeRandomTime: 1, fastFinWait2Recycle: true,
  finWait2TimeoutMilliseconds: 1, maxTCPTimeWait: 1, boot: {kern.ncallout: "1"}, sysctl: {net.inet.tcp.msl: "1"}}
rssCheck: {enabled: true, entries: [{port: p0, localAddress: 10.0.0.10, remoteAddress: 10.9.0.1, remotePort: 80}]}
pcap: {enabled: true, snapLength: 96, fileSize: 8Mi, directory: /tmp/pcap}
shim: {enabled: true, kernelEvent: false, multiSC: true, polling: false, containers: [app]}
dataplane: {image: x, flavor: KubeFStack, hugePages: {pageSize: 2Mi, amount: 1Gi},
  resources: {claims: [{name: c}], limits: {cpu: "2"}, requests: {cpu: "2"}}}
`

func loadBase(t *testing.T) map[string]any {
	t.Helper()
	base := map[string]any{}
	if err := yaml.Unmarshal([]byte(baseSpec), &base); err != nil {
		t.Fatal(err)
	}
	return normalize(base)
}

// TestRendererEnforcesEveryCRDBound walks the generated CRD: for every minimum, maximum,
// maxLength, maxItems, minItems, maxProperties, pattern, enum, required property and list type,
// a value just past the bound must be refused by the renderer at the path the API server names,
// and a value the API server accepts must pass the renderer's schema check. A bound added to
// the API without crdwalk checking it fails here.
func TestRendererEnforcesEveryCRDBound(t *testing.T) {
	adm := loadAdmission(t)
	base := loadBase(t)
	if errs := adm.admit(base); len(errs) > 0 {
		t.Fatalf("the base spec must pass the CRD: %v", errs.ToAggregate())
	}
	if errs := render.CheckSchema(decodeSpec(t, base)); len(errs) > 0 {
		t.Fatalf("the base spec must pass render.Check: %v", errs.ToAggregate())
	}
	w := newWalker()
	w.walk(adm.Spec, base, nil, "spec")
	refused := map[string]bool{}
	var skipped []string
	for i := range w.cases {
		c := &w.cases[i]
		switch outcome := runCase(t, adm, base, c); outcome {
		case "refused":
			refused[c.rule] = true
		case "":
		default:
			refused[c.rule] = true
			skipped = append(skipped, outcome)
		}
	}
	for rule := range w.rules {
		if !refused[rule] {
			t.Errorf("%s: no case the API server refuses (extend the base spec so it reaches this bound)", rule)
		}
	}
	sort.Strings(skipped)
	t.Logf("%d cases over %d bounds; not expressible in the Go types (the zero value means unset):\n  %s",
		len(w.cases), len(w.rules), strings.Join(skipped, "\n  "))
}

// runCase returns "refused" when the API server refuses the case at its path (and the renderer
// did too), "" when both accept it, or why the case could not be compared.
func runCase(t *testing.T, adm *admission, base map[string]any, c *schemaCase) string {
	t.Helper()
	spec := apply(base, c)
	admErrs := adm.admit(spec)
	want := errorAt(admErrs, c.fieldPath())
	var s fsv1.StackInstanceSpec
	raw, _ := json.Marshal(spec)
	if err := json.Unmarshal(raw, &s); err != nil {
		if !want {
			t.Errorf("%s = %v: the API server accepts it but it does not decode: %v", c.fieldPath(), c.value, err)
		}
		return map[bool]string{true: "refused"}[want]
	}
	got := errorAt(render.CheckSchema(&s), c.fieldPath())
	if want && !got && !representable(&s, spec, c) {
		return c.fieldPath() + " " + c.rule + " " + describe(c)
	}
	// A CEL rule reports at the object that holds it, the renderer at the field to change.
	if want != got && (!got || !errorAbove(admErrs, c.fieldPath())) {
		t.Errorf("%s (%s) = %s: API server refuses it there: %v, renderer: %v\n%v",
			c.fieldPath(), c.rule, describe(c), want, got, render.CheckSchema(&s).ToAggregate())
	}
	if want && !errorAt(render.Validate(&s), c.fieldPath()) {
		t.Errorf("%s (%s): render.Validate does not refuse it there", c.fieldPath(), c.rule)
	}
	return map[bool]string{true: "refused"}[want]
}

func describe(c *schemaCase) string {
	if c.delete {
		return "(deleted)"
	}
	s, _ := json.Marshal(c.value)
	if len(s) > 60 {
		s = append(s[:60], "..."...)
	}
	return string(s)
}

// errorAt says whether errs has an error at path or in a list item below it.
func errorAt(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path || strings.HasPrefix(e.Field, path+"[") {
			return true
		}
	}
	return false
}

// errorAbove says whether errs has an error at an object that contains path.
func errorAbove(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if strings.HasPrefix(path, e.Field+".") || strings.HasPrefix(path, e.Field+"[") {
			return true
		}
	}
	return false
}

// representable says whether the Go type keeps what the case set: omitempty drops zero values
// (which the renderer then defaults), and a deleted required boolean decodes as false.
func representable(s *fsv1.StackInstanceSpec, spec map[string]any, c *schemaCase) bool {
	raw, _ := json.Marshal(s)
	back := map[string]any{}
	_ = json.Unmarshal(raw, &back)
	back = wholeToInt(back).(map[string]any)
	a, okA := lookup(spec, c.path)
	b, okB := lookup(back, c.path)
	return okA == okB && reflect.DeepEqual(a, b)
}

func decodeSpec(t *testing.T, spec map[string]any) *fsv1.StackInstanceSpec {
	t.Helper()
	raw, _ := json.Marshal(spec)
	var s fsv1.StackInstanceSpec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
