package facts

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CgroupSource finds the file that holds the container's cpuset, on cgroup v1 (the cpuset
// controller's own hierarchy, also on hybrid nodes) and on cgroup v2 (the unified hierarchy,
// the default of current distributions and of kind).
type CgroupSource struct {
	// Root is prefixed to every path read (/proc/self/..., the mount points): "/" in a pod, a
	// fake tree in tests.
	Root string
}

// CpusetLocation is where the container's cpuset was found, or why it was not.
type CpusetLocation struct {
	// File is the cpuset file; empty when the check is skipped.
	File string
	// Layout says which cgroup layout was found.
	Layout string
	// Skip says why the check is skipped.
	Skip string
}

// mount is one line of /proc/self/mountinfo, reduced to what is needed here.
type mount struct {
	root, point, fstype string
	superOpts           []string
}

// maxProcFile bounds what is read from /proc: mountinfo of a busy node is tens of KiB.
const maxProcFile = 4 << 20

// Locate finds the cpuset file of the process's own cgroup. A v1 cpuset hierarchy wins over
// cgroup2: a controller is bound to one hierarchy only, so on hybrid nodes cpuset is on v1.
func (c *CgroupSource) Locate() CpusetLocation {
	mounts, err := c.mountinfo()
	if err != nil {
		return CpusetLocation{Skip: fmt.Sprintf("cannot read the mount table: %v", err)}
	}
	paths, err := c.ownCgroups()
	if err != nil {
		return CpusetLocation{Skip: fmt.Sprintf("cannot read the process's cgroup: %v", err)}
	}
	for _, m := range mounts {
		if m.fstype == "cgroup" && slices.Contains(m.superOpts, "cpuset") {
			return c.locateIn(m, paths["cpuset"], "cgroup v1 (cpuset hierarchy)", "cpuset.cpus")
		}
	}
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			return c.locateIn(m, paths[""], "cgroup v2 (unified hierarchy)", "cpuset.cpus.effective")
		}
	}
	return CpusetLocation{Skip: "no cpuset cgroup is mounted in the container (neither a cgroup v1 cpuset hierarchy nor cgroup2)"}
}

// locateIn maps the process's cgroup path onto mount m: the mount shows the hierarchy from
// m.root down, so a container that sees its own cgroup mounted (m.root = its path, or "/" in
// its own cgroup namespace) finds its files at the mount point itself.
func (c *CgroupSource) locateIn(m mount, cgPath, layout, file string) CpusetLocation {
	loc := CpusetLocation{Layout: layout}
	if cgPath == "" {
		loc.Skip = fmt.Sprintf("%s is mounted at %s but /proc/self/cgroup has no entry for it", layout, m.point)
		return loc
	}
	rel, ok := strings.CutPrefix(cgPath, strings.TrimSuffix(m.root, "/"))
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		loc.Skip = fmt.Sprintf("the process's cgroup %s is outside what %s at %s shows (%s)", cgPath, layout, m.point, m.root)
		return loc
	}
	path := filepath.Join(c.Root, m.point, filepath.Clean("/"+rel), file)
	if _, err := os.Stat(path); err != nil {
		loc.Skip = fmt.Sprintf("%s: %s is missing (is the cpuset controller enabled for this cgroup?)", layout, path)
		return loc
	}
	loc.File = path
	return loc
}

// mountinfo parses /proc/self/mountinfo: "id parent maj:min root point opts [tags] - fstype
// source superopts".
func (c *CgroupSource) mountinfo() ([]mount, error) {
	data, err := readProc(filepath.Join(c.Root, "proc", "self", "mountinfo"))
	if err != nil {
		return nil, err
	}
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		out = append(out, mount{root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: f[sep+1],
			superOpts: strings.Split(f[sep+3], ",")})
	}
	return out, sc.Err()
}

// ownCgroups parses /proc/self/cgroup: "id:controllers:path" for v1 hierarchies (by controller)
// and "0::path" for cgroup2 (key "").
func (c *CgroupSource) ownCgroups() (map[string]string, error) {
	data, err := readProc(filepath.Join(c.Root, "proc", "self", "cgroup"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, nil
}

func readProc(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxProcFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
