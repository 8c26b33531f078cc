package facts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// harness is a fake pod tree for the facts: spec, device info, volumes, and fake fact sources.
type harness struct {
	t      *testing.T
	paths  Paths
	cpus   []int
	env    map[string]string
	fsType int64
	bsize  int64
}

func newHarness(t *testing.T, spec *fsv1.StackInstanceSpec) *harness {
	t.Helper()
	root := t.TempDir()
	h := &harness{t: t, cpus: []int{2, 3}, env: map[string]string{}, fsType: hugetlbfsMagic, bsize: 2 << 20}
	h.paths = Paths{
		SpecFile: filepath.Join(root, "podinfo", "spec"), PodInfoDir: filepath.Join(root, "podinfo"),
		PodSocketDir: filepath.Join(root, "vhost"), HugePagesDir: filepath.Join(root, "huge"),
	}
	for _, d := range []string{h.paths.PodInfoDir, h.paths.PodSocketDir, h.paths.HugePagesDir} {
		mustDo(t, os.MkdirAll(d, 0o755))
	}
	data, err := json.Marshal(spec)
	mustDo(t, err)
	mustDo(t, os.WriteFile(h.paths.SpecFile, data, 0o644))
	return h
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) writeDevinfo() {
	const ifname = "net1"
	mustDo(h.t, podcontract.WriteDevInfo(filepath.Join(h.paths.PodSocketDir, ifname+".json"), &podcontract.DevInfo{
		Type: podcontract.DevInfoTypeVhostUser, Version: podcontract.DevInfoVersion,
		VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: "/var/run/kube-fstack/vhost/" + ifname + ".sock"},
		MAC:       "02:00:00:00:00:01", IPs: []string{"10.1.0.5/24"}, Gateway: "10.1.0.1",
	}))
}

func (h *harness) facts() *FactSource {
	return &FactSource{
		Paths:    h.paths,
		Affinity: func() ([]int, error) { return h.cpus, nil },
		LookupEnv: func(k string) (string, bool) {
			v, ok := h.env[k]
			return v, ok
		},
		Statfs: func(_ string, st *unix.Statfs_t) error {
			st.Type, st.Bsize = h.fsType, h.bsize
			return nil
		},
	}
}
