package facts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fake cgroup trees: /proc/self/mountinfo, /proc/self/cgroup and the cgroup files, under a
// temporary root, as the dataplane container sees them on each kind of node. (This machine is
// cgroup v1; the layouts of v2 and hybrid nodes cannot be mounted here without taking over the
// host's cgroups, so they are reproduced as files.)
type cgroupTree struct {
	mountinfo, cgroup string
	files             map[string]string // path under the root -> content
}

const (
	miProc   = "22 28 0:20 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
	miV2     = "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
	miV1CPU  = "31 30 0:27 %s /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset\n"
	miV1Mem  = "32 30 0:28 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
	miHybrid = "33 30 0:29 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
)

func (tr cgroupTree) build(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"proc/self/mountinfo": tr.mountinfo, "proc/self/cgroup": tr.cgroup}
	for k, v := range tr.files {
		files[k] = v
	}
	for p, content := range files {
		full := filepath.Join(root, p)
		mustDo(t, os.MkdirAll(filepath.Dir(full), 0o755))
		mustDo(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

func TestCgroupLayouts(t *testing.T) {
	cases := map[string]struct {
		tree       cgroupTree
		file, skip string // file relative to the root; or a fragment of the skip reason
		layout     string
	}{
		"v2 in its own cgroup namespace (kind, containerd default)": {tree: cgroupTree{
			mountinfo: miProc + miV2, cgroup: "0::/\n",
			files: map[string]string{"sys/fs/cgroup/cpuset.cpus.effective": "2-3\n", "sys/fs/cgroup/cgroup.controllers": "cpuset cpu memory\n"},
		}, file: "sys/fs/cgroup/cpuset.cpus.effective", layout: "cgroup v2"},
		"v2 seeing the host hierarchy": {tree: cgroupTree{
			mountinfo: miProc + miV2, cgroup: "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope\n",
			files: map[string]string{"sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope/cpuset.cpus.effective": "4\n"},
		}, file: "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope/cpuset.cpus.effective", layout: "cgroup v2"},
		"v1 with the container's cgroup mounted": {tree: cgroupTree{
			mountinfo: miProc + fmt.Sprintf(miV1CPU, "/kubepods/pod1/c1") + miV1Mem,
			cgroup:    "4:memory:/kubepods/pod1/c1\n3:cpuset:/kubepods/pod1/c1\n0::/\n",
			files:     map[string]string{"sys/fs/cgroup/cpuset/cpuset.cpus": "1\n"},
		}, file: "sys/fs/cgroup/cpuset/cpuset.cpus", layout: "cgroup v1"},
		"v1 seeing the host hierarchy": {tree: cgroupTree{
			mountinfo: miProc + fmt.Sprintf(miV1CPU, "/"), cgroup: "3:cpuset,cpu:/kubepods/pod1/c1\n",
			files: map[string]string{"sys/fs/cgroup/cpuset/kubepods/pod1/c1/cpuset.cpus": "1\n"},
		}, file: "sys/fs/cgroup/cpuset/kubepods/pod1/c1/cpuset.cpus", layout: "cgroup v1"},
		"hybrid: cpuset on v1, cgroup2 beside it": {tree: cgroupTree{
			mountinfo: miProc + miHybrid + fmt.Sprintf(miV1CPU, "/"), cgroup: "3:cpuset:/\n0::/\n",
			files: map[string]string{"sys/fs/cgroup/cpuset/cpuset.cpus": "1\n", "sys/fs/cgroup/unified/cgroup.controllers": ""},
		}, file: "sys/fs/cgroup/cpuset/cpuset.cpus", layout: "cgroup v1"},
		"v2 without the cpuset controller": {tree: cgroupTree{
			mountinfo: miProc + miV2, cgroup: "0::/\n", files: map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"},
		}, skip: "cpuset controller enabled", layout: "cgroup v2"},
		"no cgroup mounted": {tree: cgroupTree{mountinfo: miProc, cgroup: "0::/\n"}, skip: "no cpuset cgroup is mounted"},
		"own cgroup outside the mount": {tree: cgroupTree{
			mountinfo: miProc + fmt.Sprintf(miV1CPU, "/kubepods/pod1/c1"), cgroup: "3:cpuset:/kubepods/pod2/c9\n",
		}, skip: "outside what cgroup v1"},
		"mount point with a space": {tree: cgroupTree{
			mountinfo: miProc + `30 24 0:26 / /sys/fs/cgroup\040x rw - cgroup2 cgroup2 rw` + "\n", cgroup: "0::/\n",
			files: map[string]string{"sys/fs/cgroup x/cpuset.cpus.effective": "2\n"},
		}, file: "sys/fs/cgroup x/cpuset.cpus.effective", layout: "cgroup v2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := tc.tree.build(t)
			loc := (&CgroupSource{Root: root}).Locate()
			if tc.file != "" && loc.File != filepath.Join(root, tc.file) {
				t.Errorf("file = %q (skip %q), want %s", loc.File, loc.Skip, tc.file)
			}
			if tc.skip != "" && (loc.File != "" || !strings.Contains(loc.Skip, tc.skip)) {
				t.Errorf("want the check skipped because %q, got file %q, skip %q", tc.skip, loc.File, loc.Skip)
			}
			if !strings.HasPrefix(loc.Layout, tc.layout) {
				t.Errorf("layout = %q, want %q", loc.Layout, tc.layout)
			}
		})
	}
}

// On a cgroup v2 node the cross-check runs (it used to read a v1 path there and skip without a
// word), refuses an affinity wider than the cpuset, and the log says which layout it used.
func TestGatherChecksTheCgroupV2Cpuset(t *testing.T) {
	spec := vhostSpec(2)
	h := newHarness(t, spec)
	h.writeDevinfo()
	root := cgroupTree{mountinfo: miProc + miV2, cgroup: "0::/\n",
		files: map[string]string{"sys/fs/cgroup/cpuset.cpus.effective": "2\n"}}.build(t)
	var log strings.Builder
	fs := h.facts()
	fs.Cgroup = &CgroupSource{Root: root}
	fs.Logf = func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
	_, err := fs.Gather(checked(t, spec))
	if err == nil || !strings.Contains(err.Error(), "CPU 3 of the supervisor's affinity (2-3) is outside the container's cpuset 2") ||
		!strings.Contains(err.Error(), "cpuset.cpus.effective") {
		t.Fatalf("want the v2 cpuset to refuse CPU 3, got %v", err)
	}
	if !strings.Contains(log.String(), "cpuset cross-check: cgroup v2 (unified hierarchy)") {
		t.Errorf("the log does not say which cgroup layout was used:\n%s", log.String())
	}
}

func TestSkippedCrossCheckIsLogged(t *testing.T) {
	spec := vhostSpec(2)
	h := newHarness(t, spec)
	h.writeDevinfo()
	var log strings.Builder
	fs := h.facts()
	fs.Cgroup = &CgroupSource{Root: cgroupTree{mountinfo: miProc, cgroup: "0::/\n"}.build(t)}
	fs.Logf = func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
	if _, err := fs.Gather(checked(t, spec)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "cpuset cross-check skipped: no cpuset cgroup is mounted") {
		t.Errorf("a skipped check must say why:\n%s", log.String())
	}
}
