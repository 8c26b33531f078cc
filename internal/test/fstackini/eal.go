package fstackini

import (
	"fmt"
	"math/big"
	"strings"
)

// EAL is the argv F-Stack's dpdk_args_setup builds for process proc (docs/fstack-rules.md §2). patched
// applies kube-fstack's image patches: the default file prefix is kept with vdevs and
// --single-file-segments is appended. KUBE_FSTACK_LCORE_CPUS is taken as unset (EALWithEnv).
func (c *Config) EAL(proc int, patched bool) []string { return c.EALWithEnv(proc, patched, "", false) }

// EALWithEnv is EAL in an environment where KUBE_FSTACK_LCORE_CPUS is lcoreCPUs (set says whether it
// is set at all). With patch 0003 a value naming a CPU for proc (comma-separated decimal CPUs,
// entry proc) replaces -c<lcore> by --lcores=<lcore>@<CPU>; any other value keeps -c.
func (c *Config) EALWithEnv(proc int, patched bool, lcoreCPUs string, set bool) []string {
	d := c.DPDK
	argv := []string{"f-stack"}
	if d["no_huge"] == "1" {
		argv = append(argv, "--no-huge")
	}
	if cpu, ok := lcoreCPU(lcoreCPUs, proc); patched && set && ok {
		argv = append(argv, fmt.Sprintf("--lcores=%d@%s", c.Lcores[proc], cpu))
	} else {
		argv = append(argv, "-c"+new(big.Int).SetBit(new(big.Int), c.Lcores[proc], 1).Text(16))
	}
	for _, o := range []struct{ key, flag string }{{"channel", "-n"}, {"memory", "-m"}, {"log_level", "--log-level="}} {
		if v := d[o.key]; v != "" && v != "0" {
			argv = append(argv, o.flag+v)
		}
	}
	pt := "secondary"
	if proc == 0 {
		pt = "primary"
	}
	argv = append(argv, "--proc-type="+pt)
	if v := d["base_virtaddr"]; v != "" {
		argv = append(argv, "--base-virtaddr="+v)
	}
	if v := d["file_prefix"]; v != "" {
		argv = append(argv, "--file-prefix=container-"+v)
	}
	allow := d["allow"]
	if c.Version == V124 {
		allow = d["pci_whitelist"]
	}
	if allow != "" {
		for _, bdf := range strings.Split(allow, ",") {
			argv = append(argv, "--allow="+bdf)
		}
	}
	for i := 0; i < c.NbVdev; i++ {
		v := c.Vdevs[i]
		a := fmt.Sprintf("--vdev=virtio_user%d,path=%s", i, v["path"])
		for _, k := range []string{"queues", "cq", "queue_size"} {
			if v[k] != "" && v[k] != "0" {
				a += "," + k + "=" + v[k]
			}
		}
		if v["mac"] != "" {
			a += ",mac=" + v["mac"]
		}
		argv = append(argv, a)
	}
	if c.NbVdev > 0 {
		argv = append(argv, "--no-pci")
		if d["file_prefix"] == "" && !patched {
			argv = append(argv, "--file-prefix=container")
		}
	}
	for i := 0; i < c.NbBond; i++ {
		b := c.Bonds[i]
		a := fmt.Sprintf("net_bonding%d,mode=%s,slave=%s", i, b["mode"], b["slave"])
		for _, k := range []string{"primary", "socket_id", "mac", "xmit_policy"} {
			if b[k] != "" && b[k] != "0" {
				a += "," + k + "=" + b[k]
			}
		}
		argv = append(argv, "--vdev", a)
	}
	if patched && d["no_huge"] != "1" {
		argv = append(argv, "--single-file-segments")
	}
	return argv
}

// lcoreCPU is entry proc of patch 0003's list, as its C reads it: only digits and commas in the
// whole value, the entry 1-4 digits long, verbatim (leading zeros kept).
func lcoreCPU(list string, proc int) (string, bool) {
	if strings.Trim(list, "0123456789,") != "" {
		return "", false
	}
	fields := strings.Split(list, ",")
	if proc >= len(fields) {
		return "", false
	}
	f := fields[proc]
	return f, len(f) >= 1 && len(f) <= 4
}
