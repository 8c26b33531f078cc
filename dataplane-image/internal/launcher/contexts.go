package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// ensureContexts returns the generation to start the app against once its instances have the
// shim contexts it needs. When a fresh reading shows too few (the app's previous runs were
// killed and leaked theirs), it asks the supervisor for a dataplane restart, which makes fresh
// zones, and waits for the new generation: an app started short would silently run on kernel
// sockets. A dataplane that publishes no counts (an older image, or one that cannot read them)
// is said in the log and not waited for.
func (l *Launcher) ensureContexts(ctx context.Context, gen string, need []int) (string, error) {
	start := shimctx.Now()
	requested := false
	for {
		st, err := l.freshState(ctx, gen, start)
		if errors.Is(err, errGenerationMoved) {
			// The dataplane is restarting (for another app, or its primary died): start over
			// against the generation that comes next.
			if gen, err = l.waitReady(ctx); err != nil {
				return "", err
			}
			start = shimctx.Now()
			continue
		}
		if err != nil {
			return "", err
		}
		switch {
		case st == nil:
			l.log().Info("the dataplane publishes no shim context counts: starting without checking them", "file", l.ShimDir+"/"+shimctx.StateFile)
			return gen, nil
		case st.Error != "":
			l.log().Warn("the dataplane cannot count the shim contexts: starting without checking them", logging.KeyErr, st.Error)
			return gen, nil
		}
		short := st.Short(need)
		if len(short) == 0 {
			l.log().Info("shim contexts", "free", freeList(st), "need", fmt.Sprint(need), "source", st.Source, logging.KeyGeneration, gen)
			return gen, nil
		}
		for k, n := range need {
			if k < len(st.Instances) && n > st.Instances[k].Capacity {
				return "", fmt.Errorf("the app needs %d shim contexts on F-Stack instance %d, which has %d in all: run fewer processes (worker_processes)", n, k, st.Instances[k].Capacity)
			}
		}
		if requested {
			return "", fmt.Errorf("still too few shim contexts after asking the dataplane to restart (%v, generation %s): another app of the pod holds them", short, gen)
		}
		l.log().Warn("too few free shim contexts for this app (processes killed earlier never gave theirs back): asking the dataplane to restart rather than start on kernel sockets", "short", fmt.Sprint(short), logging.KeyGeneration, gen)
		if gen, err = l.requestRestart(ctx, gen, need); err != nil {
			return "", err
		}
		requested, start = true, shimctx.Now()
	}
}

var errGenerationMoved = errors.New("the dataplane left the generation this app was starting against")

// freshState waits for a reading of generation gen that began after start; nil when the
// dataplane publishes none.
func (l *Launcher) freshState(ctx context.Context, gen string, start int64) (*shimctx.State, error) {
	deadline := time.Now().Add(l.WaitTimeout)
	for {
		st, err := shimctx.ReadState(l.ShimDir)
		switch {
		case errors.Is(err, os.ErrNotExist) && l.read(podcontract.ReadyFile) == gen:
			return nil, nil // a dataplane that publishes none: it writes the file before ready
		case errors.Is(err, os.ErrNotExist):
			return nil, errGenerationMoved
		case err == nil && strconv.Itoa(st.Generation) == gen && st.ReadAt >= start:
			return st, nil
		case err == nil && strconv.Itoa(st.Generation) != gen && l.read(podcontract.ReadyFile) != gen:
			return nil, errGenerationMoved
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("the last reading is of generation %d, made before this app started", st.Generation)
			}
			return nil, fmt.Errorf("no fresh shim context count from the dataplane within %s (%s/%s: %w)", l.WaitTimeout, l.ShimDir, shimctx.StateFile, err)
		}
		if err := l.sleep(ctx); err != nil {
			return nil, err
		}
	}
}

// requestRestart writes the request and waits for the supervisor to start a new generation and
// report it ready. A request the supervisor declines (it found enough contexts) is removed, and
// the check runs again.
func (l *Launcher) requestRestart(ctx context.Context, gen string, need []int) (string, error) {
	g, _ := strconv.Atoi(gen)
	asked := shimctx.Now()
	if err := shimctx.Write(l.StateDir, shimctx.RequestFile, &shimctx.Request{Generation: g, Container: l.Container, Need: need, Asked: asked}); err != nil {
		return "", fmt.Errorf("ask for a dataplane restart: %w", err)
	}
	deadline := time.Now().Add(l.WaitTimeout)
	for {
		now := l.read(podcontract.GenerationFile)
		if now != gen && now != "" && l.read(podcontract.ReadyFile) == now {
			l.log().Info("the dataplane restarted", logging.KeyGeneration, now, "was", gen)
			return now, nil
		}
		if r, err := shimctx.ReadDeclined(l.ShimDir, l.Container); err == nil && r.Generation == g && r.Asked == asked && now == gen {
			l.log().Info("the dataplane declined the restart (its reading shows enough contexts): checking again", logging.KeyGeneration, gen)
			return gen, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the dataplane did not restart within %s after this app asked (%s/%s): not starting the app on kernel sockets", l.WaitTimeout, l.StateDir, shimctx.RequestFile)
		}
		if err := l.sleep(ctx); err != nil {
			return "", err
		}
	}
}

func (l *Launcher) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(l.Poll):
		return nil
	}
}

func freeList(st *shimctx.State) string {
	s := ""
	for k, in := range st.Instances {
		if k > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d/%d", in.Free, in.Capacity)
	}
	return "[" + s + "]"
}
