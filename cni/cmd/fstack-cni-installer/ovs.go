package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// ovsAsker is the installer container's second job: it asks OVSDB the node checks' questions
// every period and writes the answers where the node agent reads them (see
// internal/nodecheck/ovsfile.go for why the agent holds no OVS socket itself).
type ovsAsker struct {
	OVS    nodecheck.OVS
	Bridge string
	Path   string
	Period time.Duration
	Log    *slog.Logger
}

// run answers at once, then every period until ctx ends.
func (o *ovsAsker) run(ctx context.Context) {
	t := time.NewTicker(o.Period)
	defer t.Stop()
	for {
		a := nodecheck.AskOVS(ctx, o.OVS, o.Bridge, time.Now())
		if err := nodecheck.WriteOVSAnswers(o.Path, a); err != nil {
			o.Log.Error("OVS answers for the node agent", logging.KeyErr, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
