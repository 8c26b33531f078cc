package supervisor

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Under the lab's cpuPolicy Shared, a generation runs its lcore on the highest CPU of the
// shared pool, records that beside the shim before the launcher is placed (the app containers
// keep off it), and /status says it.
func TestSharedStackRecordsItsPlacement(t *testing.T) {
	spec := vhostSpec(1)
	spec.DPDK.CPUPolicy = fsv1.CPUShared
	h := newHarness(t, spec)
	h.writeDevinfo()
	h.cpus = []int{0, 1}
	s := h.supervisor("primary", "secondary")
	ctx, cancel := context.WithCancel(context.Background())
	res := run(s, ctx)
	defer func() {
		cancel()
		if err := <-res; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	p, err := podcontract.ReadPlacement(h.paths.ShimDir)
	if err != nil || p == nil {
		t.Fatalf("placement beside the shim: %v, %v", p, err)
	}
	if !reflect.DeepEqual(p.LcoreCPUs, []int{1}) {
		t.Errorf("lcore CPUs %v, want [1]: the app takes CPU 0", p.LcoreCPUs)
	}
	if st := decodeStatus(t, s); st.Placement == nil || !reflect.DeepEqual(st.Placement.LcoreCPUs, []int{1}) {
		t.Errorf("/status placement %+v, want lcores on CPU 1", st.Placement)
	}
	if !h.logged("lcores placed", "lcoreCPUs", "1") {
		t.Error("the log does not say where the lcores went")
	}
	if got := s.running.Load(); got == nil || !slices.Contains(strings.Split(got.ConfigINI, "\n"), "lcore_mask=2") {
		t.Errorf("config.ini does not run the lcore on CPU 1")
	}
}
