package fstackini

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Config is what F-Stack's handlers make of the file.
type Config struct {
	Version Version
	// DPDK holds every [dpdk] key as written.
	DPDK map[string]string
	// Lcores are the set bits of lcore_mask, ascending: process k runs on Lcores[k].
	Lcores     []int
	PortList   []int
	VLANFilter []int
	NbVdev     int
	NbBond     int
	Ports      map[int]*Iface
	VLANs      map[int]*Iface
	Vdevs      map[int]map[string]string
	Bonds      map[int]map[string]string
	Pcap       map[string]string
	RSSEnable  bool
	// RSS are the rss_tbl entries, each exactly 4 fields.
	RSS    [][4]string
	KNI    map[string]string
	Boot   []KV
	Sysctl []KV
	// Sections in file order.
	Sections []string
}

// KV is one FreeBSD tunable, in file order.
type KV struct{ Key, Value string }

// Iface is a [portN] or [vlanN] section.
type Iface struct {
	Keys      map[string]string
	LcoreList []int
	Slaves    []int
	VIPs      []string
	VIPs6     []string
	IPFW      []string
	PortID    int // [vlanN] only
}

type parser struct {
	c       *Config
	seen    map[string]bool // section\x00key
	portAny bool            // some [portN]/[vlanN] key was read
}

// Parse reads config.ini like F-Stack's ff_load_config and ff_check_config, failing where F-Stack
// exits or crashes and, strictly, where it would silently ignore or override something.
func Parse(data []byte, v Version) (*Config, error) {
	toks, err := tokenize(data)
	if err != nil {
		return nil, err
	}
	p := &parser{c: newConfig(v), seen: map[string]bool{}}
	for _, t := range toks {
		if err := p.handle(t); err != nil {
			return nil, err
		}
	}
	if err := p.c.check(); err != nil {
		return nil, err
	}
	return p.c, nil
}

func newConfig(v Version) *Config {
	return &Config{Version: v, DPDK: map[string]string{}, Ports: map[int]*Iface{}, VLANs: map[int]*Iface{},
		Vdevs: map[int]map[string]string{}, Bonds: map[int]map[string]string{}}
}

func (p *parser) handle(t token) error {
	fail := func(format string, a ...any) error { return &Error{t.line, fmt.Sprintf(format, a...)} }
	if t.continuation {
		return fail("indented line continues key %q: F-Stack reads it as a new value of that key", t.name)
	}
	k := t.section + "\x00" + t.name
	if p.seen[k] {
		return fail("key %q repeated in [%s]: F-Stack keeps the last value", t.name, t.section)
	}
	p.seen[k] = true
	if len(p.c.Sections) == 0 || p.c.Sections[len(p.c.Sections)-1] != t.section {
		p.c.Sections = append(p.c.Sections, t.section)
	}
	var err error
	switch s := t.section; {
	case s == "dpdk":
		err = p.dpdk(t.name, t.value)
	case s == "pcap":
		err = p.simple(&p.c.Pcap, t.name, t.value, "enable", "snaplen", "savelen", "savepath")
	case s == "rss_check":
		err = p.rss(t.name, t.value)
	case s == "kni":
		err = p.kni(t.name, t.value)
	case s == "freebsd.boot":
		p.c.Boot = append(p.c.Boot, KV{t.name, t.value})
	case s == "freebsd.sysctl":
		p.c.Sysctl = append(p.c.Sysctl, KV{t.name, t.value})
	case strings.HasPrefix(s, "port"), strings.HasPrefix(s, "vlan"),
		strings.HasPrefix(s, "vdev"), strings.HasPrefix(s, "bond"):
		err = p.numbered(s, t.name, t.value)
	default:
		err = fmt.Errorf("unknown section [%s]: F-Stack ignores it", s)
	}
	if err != nil {
		return fail("[%s] %s: %v", t.section, t.name, err)
	}
	return nil
}

var dpdkKeys = map[string]bool{
	"lcore_mask": true, "channel": true, "memory": true, "no_huge": true, "base_virtaddr": true,
	"file_prefix": true, "port_list": true, "nb_vdev": true, "nb_bond": true, "promiscuous": true,
	"numa_on": true, "tso": true, "tx_csum_offoad_skip": true, "vlan_strip": true, "vlan_filter": true,
	"idle_sleep": true, "pkt_tx_delay": true, "symmetric_rss": true, "log_level": true,
}

func (p *parser) dpdk(name, value string) error {
	switch {
	case dpdkKeys[name]:
	case name == "allow" && p.c.Version == V125, name == "pci_whitelist" && p.c.Version == V124:
	case (name == "fstack_log_level" || name == "fstack_log_file_prefix") && p.c.Version == V125:
	default:
		return fmt.Errorf("not a [dpdk] key of F-Stack %s: it would be ignored", p.c.Version)
	}
	if p.portAny && (name == "lcore_mask" || name == "port_list" || name == "vlan_filter") {
		return fmt.Errorf("must come before every [portN]/[vlanN] key")
	}
	p.c.DPDK[name] = value
	var err error
	switch name {
	case "lcore_mask":
		p.c.Lcores, err = parseMask(value)
	case "port_list":
		p.c.PortList, err = parseList(value)
	case "vlan_filter":
		p.c.VLANFilter, err = parseList(value)
	case "nb_vdev":
		p.c.NbVdev, err = parseCount(value)
	case "nb_bond":
		p.c.NbBond, err = parseCount(value)
	}
	return err
}

// maxDevCount bounds nb_vdev and nb_bond: each device takes a DPDK port id, and DPDK has
// RTE_MAX_ETHPORTS (32) of them; F-Stack's own EAL argv budget (docs/fstack-rules.md §2) is smaller still.
// Without the bound a count of 10^12 would have the checks walk 10^12 sections.
const maxDevCount = 32

func parseCount(value string) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", value)
	}
	if n < 0 || n > maxDevCount {
		return 0, fmt.Errorf("%d is outside 0..%d (RTE_MAX_ETHPORTS)", n, maxDevCount)
	}
	return n, nil
}

func (p *parser) simple(m *map[string]string, name, value string, keys ...string) error {
	if *m == nil {
		*m = map[string]string{}
	}
	for _, k := range keys {
		if k == name {
			(*m)[name] = value
			return nil
		}
	}
	return fmt.Errorf("unknown key: F-Stack ignores it")
}

func (p *parser) kni(name, value string) error {
	keys := []string{"enable", "method", "tcp_port", "udp_port", "kni_action",
		"console_packets_ratelimit", "general_packets_ratelimit", "kernel_packets_ratelimit"}
	if p.c.Version == V124 {
		keys = append(keys, "type")
	}
	if err := p.simple(&p.c.KNI, name, value, keys...); err != nil {
		return err
	}
	if name == "tcp_port" || name == "udp_port" {
		ports, err := parseList(value)
		for _, port := range ports {
			if port > 65535 {
				return fmt.Errorf("port %d out of range", port)
			}
		}
		return err
	}
	return nil
}

func (p *parser) rss(name, value string) error {
	if p.c.Version != V125 {
		return fmt.Errorf("[rss_check] does not exist before v1.25")
	}
	if !p.portAny {
		return fmt.Errorf("must config dpdk.port or dpdk.vlan first")
	}
	switch name {
	case "enable":
		p.c.RSSEnable = value == "1"
	case "rss_tbl":
		for _, e := range strings.Split(strings.TrimSuffix(value, ";"), ";") {
			f := strings.Split(e, " ")
			if len(f) != 4 {
				return fmt.Errorf("entry %q has %d fields, not 4 single-space separated: F-Stack drops the whole table", e, len(f))
			}
			p.c.RSS = append(p.c.RSS, [4]string{f[0], f[1], f[2], f[3]})
		}
	default:
		return fmt.Errorf("unknown key: F-Stack ignores it")
	}
	return nil
}

// parseMask reads a hex lcore mask from its least significant digit: bit i is lcore i.
func parseMask(s string) ([]int, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	if s == "" {
		return nil, fmt.Errorf("empty mask")
	}
	var lcores []int
	for i := 0; i < len(s); i++ {
		d, err := strconv.ParseUint(s[len(s)-1-i:len(s)-i], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("%q is not hex", s)
		}
		for b := 0; b < 4; b++ {
			if d&(1<<b) != 0 {
				lcores = append(lcores, 4*i+b)
			}
		}
	}
	if len(lcores) == 0 {
		return nil, fmt.Errorf("no lcore set")
	}
	if lcores[len(lcores)-1] >= 128 {
		return nil, fmt.Errorf("lcore %d beyond RTE_MAX_LCORE", lcores[len(lcores)-1])
	}
	return lcores, nil
}

// F-Stack splits a list into at most 128 tokens (rte_strsplit) and stores each number as a
// uint16 in an array of at most a few hundred entries ("too many elements in list").
const (
	maxListTokens = 128
	maxListValue  = 65535
	maxListElems  = 4096
)

// parseList reads F-Stack's list syntax ("1-3,4,7"), sorted; an empty list is refused here
// although F-Stack accepts it and reads garbage, and so is what F-Stack would silently cut:
// tokens past the 128th, numbers past uint16.
func parseList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty list (F-Stack reads garbage)")
	}
	toks := strings.Split(s, ",")
	if len(toks) > maxListTokens {
		return nil, fmt.Errorf("%d items: F-Stack reads the first %d and drops the rest", len(toks), maxListTokens)
	}
	var out []int
	for _, tok := range toks {
		tok = strings.TrimSpace(tok)
		lo, hi, isRange := strings.Cut(tok, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("%q is not an integer or range", tok)
		}
		if b > maxListValue {
			return nil, fmt.Errorf("%q: F-Stack stores list items as 16-bit numbers", tok)
		}
		if len(out)+b-a+1 > maxListElems {
			return nil, fmt.Errorf("%q: too many elements in the list (F-Stack fails on it)", tok)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out, nil
}
