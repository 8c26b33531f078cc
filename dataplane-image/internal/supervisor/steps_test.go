package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/slots"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

func shimSpecHarness(t *testing.T) *harness {
	spec := vhostSpec(1)
	enabled := true
	spec.Shim.Enabled = &enabled
	h := newHarness(t, spec)
	h.writeDevinfo()
	return h
}

// Ready includes the first reading of the shim's contexts. The stand-in's slot files appear
// after the primary is up, as F-Stack's zones appear only after ff_init returns: the ready
// marker, which lets the launchers go, must come after a reading of them, never with the
// "cannot read" state that made the launcher start its app unchecked.
func TestReadyWaitsForTheFirstContextReading(t *testing.T) {
	h := shimSpecHarness(t)
	s := h.supervisor("primary", "secondary")
	s.Cfg.ShimContexts, s.Cfg.ContextKinds = slots.Kind, map[string]func(string, string) contexts.ContextSource{slots.Kind: slots.Maker(300 * time.Millisecond)}
	var atReady atomic.Pointer[shimctx.State]
	var stateErr atomic.Value
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if h.shimFile(podcontract.ReadyFile) == "1" {
				st, err := shimctx.ReadState(h.paths.ShimDir)
				if err != nil {
					stateErr.Store(err.Error())
				}
				atReady.Store(st)
				return
			}
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	<-watching
	st := atReady.Load()
	if st == nil {
		t.Fatalf("no contexts state at ready (%v):\n%s", stateErr.Load(), h.log.String())
	}
	if st.Error != "" || len(st.Instances) != 1 || st.Instances[0].Free != 32 {
		t.Fatalf("the state at ready is %+v, want a reading of 32 free contexts", st)
	}
	stop()
	mustDo(t, waitResult(t, res))
}

// failingSource never reads: an fstack that creates no zones (not adapter/syscall's).
type failingSource struct{}

func (failingSource) Reset(int, int) error { return nil }
func (failingSource) Read() ([]shimctx.Instance, error) {
	return nil, errors.New("the primary has no memzone ff_socket_ops_zone_0")
}
func (failingSource) Name() string { return "F-Stack zones" }

// Contexts that can never be read fail the start, bounded, naming the step and the reason.
func TestUnreadableContextsFailTheStart(t *testing.T) {
	h := shimSpecHarness(t)
	s := h.supervisor("primary", "secondary")
	s.Contexts = failingSource{}
	s.Cfg.Timing.StartTimeout = 300 * time.Millisecond
	err := waitResult(t, run(s, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "the shim's contexts of every F-Stack process read once") ||
		!strings.Contains(err.Error(), "no memzone ff_socket_ops_zone_0") {
		t.Fatalf("got %v, want the start to fail naming the contexts and why", err)
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Error("ready was published without a reading")
	}
}
