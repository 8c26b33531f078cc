package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/slots"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// The coupling on the supervisor's side, with the stand-in's slot files and fake F-Stack
// processes: readings reach the shim dir and the metrics; a request naming the generation is
// honoured only when the reading confirms the shortage, and then Run ends for a restart whose
// new generation has fresh slots.
func TestRestartsForAJustifiedContextRequest(t *testing.T) {
	spec := vhostSpec(1)
	enabled := true
	spec.Shim.Enabled = &enabled
	h := newHarness(t, spec)
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	s.Cfg.ShimContexts, s.Cfg.ContextKinds = slots.Kind, map[string]func(string, string) contexts.ContextSource{slots.Kind: slots.Maker(0)}
	res := run(s, context.Background())
	eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	slots := filepath.Join(h.paths.RuntimeDir, "rte", slots.SlotFile(0))
	st, err := shimctx.ReadState(h.paths.ShimDir)
	mustDo(t, err)
	if st.Generation != 1 || len(st.Instances) != 1 || st.Instances[0].Free != 32 {
		t.Fatalf("first reading %+v, want generation 1 with 32 free", st)
	}

	// A request while enough are free is declined and removed.
	own := filepath.Join(h.paths.AppStateDir, "nginx")
	mustDo(t, shimctx.Write(own, shimctx.RequestFile, &shimctx.Request{Generation: 1, Container: "nginx", Need: []int{3}}))
	// decline logs, then writes the answer, then removes the request: wait for the last.
	eventually(t, "the request declined and removed", func() bool {
		_, err := os.Stat(filepath.Join(own, shimctx.RequestFile))
		return strings.Contains(h.log.String(), "enough are free now: not restarting") && os.IsNotExist(err)
	})

	// 30 slots held by holders unknown to the dataplane (recorded as pid 0, which is never
	// reclaimed): the request is honoured.
	held := make([]byte, 32+32*16)
	copy(held[2:], strings.Repeat("\x01", 30))
	mustDo(t, os.WriteFile(slots, held, 0o666))
	eventually(t, "the metric", func() bool { return strings.Contains(h.metricsText(s), `fstack_shim_contexts_free{process="0"} 2`) })
	mustDo(t, shimctx.Write(own, shimctx.RequestFile, &shimctx.Request{Generation: 1, Container: "nginx", Need: []int{3}}))
	if err := waitResult(t, res); !errors.Is(err, ErrRestartRequested) {
		t.Fatalf("Run returned %v, want ErrRestartRequested", err)
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Fatal("the ready marker survived the restart's shutdown")
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res = run(s, ctx)
	eventually(t, "generation 2 ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "2" })
	if st, err := shimctx.ReadState(h.paths.ShimDir); err != nil || st.Generation != 2 || st.Instances[0].Free != 32 {
		t.Fatalf("after the restart: %+v %v, want generation 2 with 32 free", st, err)
	}
	m := h.metricsText(s)
	for _, want := range []string{"fstack_dataplane_restarts_for_contexts_total 1", `fstack_shim_contexts_free{process="0"} 32`,
		"fstack_dataplane_generation 2", `fstack_dataplane_restarts_total{reason="container"} 1`} { // Run driven twice by hand, as two containers would
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	stop()
	mustDo(t, waitResult(t, res))
}

func (h *harness) metricsText(s *Supervisor) string {
	mfs, err := s.metrics.Reg.Gather()
	mustDo(h.t, err)
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += fmt.Sprintf(`%s="%s"`, l.GetName(), l.GetValue())
			}
			if labels != "" {
				labels = "{" + labels + "}"
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Fprintf(&b, "%s%s %g\n", mf.GetName(), labels, v)
		}
	}
	return b.String()
}
