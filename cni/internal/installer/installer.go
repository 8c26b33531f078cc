// Package installer puts fstack-cni on a node from the DaemonSet: the binary into the host's
// CNI bin dir, and optionally the plugin appended to the node's chained conflist. It keeps
// both in place (a node cleanup or a package upgrade may remove them) until told to stop.
package installer

import (
	"bytes"
	"context"
	"fmt"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// Installer holds the paths; all are on the host (mounted into the DaemonSet pod).
type Installer struct {
	Source   string        // the fstack-cni binary shipped in the image
	BinDir   string        // the host's CNI bin dir, e.g. /opt/cni/bin
	Conflist string        // optional: the chained conflist to merge the plugin into
	Plugin   []byte        // the plugin's JSON object for the conflist
	Interval time.Duration // how often to re-check
	Log      *slog.Logger
}

// Run installs, then re-installs whatever went missing every Interval, until ctx ends.
func (in *Installer) Run(ctx context.Context) error {
	if err := in.Once(); err != nil {
		return err
	}
	t := time.NewTicker(in.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := in.Once(); err != nil {
				in.Log.Error("install", logging.KeyErr, err)
			}
		}
	}
}

// Once makes the node right: the binary identical to Source, and the plugin in the conflist.
func (in *Installer) Once() error {
	if err := in.installBinary(); err != nil {
		return err
	}
	if in.Conflist == "" {
		return nil
	}
	return MergeConflist(in.Conflist, in.Plugin)
}

func (in *Installer) installBinary() error {
	want, err := os.ReadFile(in.Source)
	if err != nil {
		return fmt.Errorf("read %s: %w", in.Source, err)
	}
	dst := filepath.Join(in.BinDir, filepath.Base(in.Source))
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := fsutil.WriteAtomic(dst, want, 0o755); err != nil {
		return err
	}
	in.Log.Info("installed", "path", dst)
	return nil
}
