package plugin

import (
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/cni/internal/jsonw"
)

// printResult prints res as the result of spec version, as types.PrintResult does. For the
// versions whose result is current.Result itself (1.0.0, 1.1.0) it is written with jsonw:
// the library's Result.MarshalJSON encodes, decodes and encodes again through reflection, an
// eighth of an ADD's own CPU time. Older versions go through the library's conversion.
func printResult(res *current.Result, version string) error {
	if version != "1.0.0" && version != "1.1.0" {
		return types.PrintResult(res, version)
	}
	_, err := os.Stdout.Write(encodeResult(res, version))
	return err
}

func encodeResult(res *current.Result, version string) []byte {
	b := jsonw.AppendString(append(make([]byte, 0, 1024), `{"cniVersion":`...), version)
	b = appendObjects(b, "interfaces", len(res.Interfaces), func(b []byte, i int) []byte {
		return appendInterface(b, res.Interfaces[i])
	})
	b = appendObjects(b, "ips", len(res.IPs), func(b []byte, i int) []byte { return appendIPConfig(b, res.IPs[i]) })
	b = appendObjects(b, "routes", len(res.Routes), func(b []byte, i int) []byte { return appendRoute(b, res.Routes[i]) })
	if !res.DNS.IsEmpty() {
		m := member{b: append(b, `,"dns":{`...)}
		m.strings("nameservers", res.DNS.Nameservers)
		m.str("domain", res.DNS.Domain)
		m.strings("search", res.DNS.Search)
		m.strings("options", res.DNS.Options)
		b = m.b
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

// appendObjects appends `,"name":[...]` unless n is 0 (the library's omitempty).
func appendObjects(b []byte, name string, n int, elem func([]byte, int) []byte) []byte {
	if n == 0 {
		return b
	}
	b = append(jsonw.AppendString(append(b, ','), name), ':', '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i)
	}
	return append(b, ']')
}

func appendInterface(b []byte, iface *current.Interface) []byte {
	if iface == nil {
		return append(b, "null"...)
	}
	m := member{b: append(b, '{'), always: true}
	m.str("name", iface.Name)
	m.always = false
	m.str("mac", iface.Mac)
	m.num("mtu", iface.Mtu)
	m.str("sandbox", iface.Sandbox)
	m.str("socketPath", iface.SocketPath)
	m.str("pciID", iface.PciID)
	return append(m.b, '}')
}

func appendIPConfig(b []byte, ip *current.IPConfig) []byte {
	if ip == nil {
		return append(b, "null"...)
	}
	m := member{b: append(b, '{')}
	if ip.Interface != nil {
		m.always = true
		m.num("interface", *ip.Interface)
	}
	m.always = true
	m.str("address", ip.Address.String())
	m.always = false
	m.ip("gateway", ip.Gateway)
	return append(m.b, '}')
}

func appendRoute(b []byte, r *types.Route) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	m := member{b: append(b, '{'), always: true}
	m.str("dst", r.Dst.String())
	m.always = false
	m.ip("gw", r.GW)
	m.num("mtu", r.MTU)
	m.num("advmss", r.AdvMSS)
	m.num("priority", r.Priority)
	for _, p := range []struct {
		name string
		v    *int
	}{{"table", r.Table}, {"scope", r.Scope}} {
		if p.v != nil {
			m.always = true
			m.num(p.name, *p.v)
			m.always = false
		}
	}
	return append(m.b, '}')
}

// member appends the members of one object, commas between them; a zero value is left out
// unless always is set (encoding/json's omitempty).
type member struct {
	b      []byte
	n      int
	always bool
}

func (m *member) key(name string) {
	if m.n > 0 {
		m.b = append(m.b, ',')
	}
	m.n++
	m.b = append(jsonw.AppendString(m.b, name), ':')
}

func (m *member) str(name, v string) {
	if v != "" || m.always {
		m.key(name)
		m.b = jsonw.AppendString(m.b, v)
	}
}

func (m *member) num(name string, v int) {
	if v != 0 || m.always {
		m.key(name)
		m.b, _ = jsonw.AppendValue(m.b, v)
	}
}

func (m *member) ip(name string, v net.IP) {
	if len(v) > 0 {
		m.key(name)
		m.b = jsonw.AppendString(m.b, v.String())
	}
}

func (m *member) strings(name string, v []string) {
	if len(v) > 0 {
		m.key(name)
		m.b, _ = jsonw.AppendValue(m.b, v)
	}
}
