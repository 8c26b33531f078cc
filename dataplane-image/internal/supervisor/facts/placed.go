package facts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// WaitPlaced returns once the launcher is in shimDir as an executable regular file (never
// through a symlink: the app containers can write that volume), or fails when ctx ends. It is
// the dataplane's postStart hook (`fstack-supervisor wait-placed`): the kubelet runs the hook
// inside the container's start and starts the app containers, whose command is the launcher,
// only after it returns. That costs no kubelet relist, where a startup probe cost one. Which
// generation is ready is none of its business: the launcher holds the app until then.
//
// why, when not nil, says what the supervisor reports (its /startedz answer) for the error, so
// the FailedPostStartHook event tells the user what to fix.
func WaitPlaced(ctx context.Context, shimDir string, poll time.Duration, why func() string) error {
	path := filepath.Join(shimDir, podcontract.Launcher)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		fi, err := os.Lstat(path)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("fstack-supervisor has not placed %s (%s); the app containers cannot start without it", path, placedState(fi, err))
			if why != nil {
				if w := why(); w != "" {
					msg += "; the supervisor says: " + w
				}
			}
			return errors.New(msg + "; the fstack-dataplane container's log says more")
		case <-t.C:
		}
	}
}

func placedState(fi os.FileInfo, err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "not there"
	case err != nil:
		return err.Error()
	case !fi.Mode().IsRegular():
		return "not a regular file: " + fi.Mode().Type().String()
	default:
		return "not executable: " + fi.Mode().Perm().String()
	}
}

// StartedzReason asks the supervisor at addr why it has not started (its /startedz answer),
// briefly: the answer only decorates an error.
func StartedzReason(addr string) func() string {
	return func() string {
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get("http://" + addr + podcontract.StartedzPath)
		if err != nil {
			return "not answering on " + addr + " (it may have exited)"
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return strings.TrimSpace(string(body))
	}
}
