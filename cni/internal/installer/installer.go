// Package installer puts fstack-cni on a node from the DaemonSet: the binary into the host's
// CNI bin dir, and optionally the plugin appended to the node's chained conflist. It keeps
// both in place (a node cleanup or a package upgrade may remove them) until told to stop.
package installer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// Installer holds the paths; all are on the host (mounted into the DaemonSet pod).
type Installer struct {
	Source   string        // the fstack-cni binary shipped in the image
	BinDir   string        // the host's CNI bin dir, e.g. /opt/cni/bin
	Conflist string        // optional: the chained conflist to merge the plugin into
	Plugin   []byte        // the plugin's JSON object for the conflist
	Interval time.Duration // how often to re-check
	Log      *slog.Logger
	// NodeConfig is where fstack-cni's node config goes on the host (empty: the installer
	// leaves it to the node's administrator), NodeConf what it holds.
	NodeConfig string
	NodeConf   *nodeconf.Conf
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
	if err := in.writeNodeConfig(); err != nil {
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
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) && executable(dst) {
		return nil
	}
	if err := fsutil.WriteAtomic(dst, want, 0o755); err != nil {
		return err
	}
	in.Log.Info("installed", "path", dst)
	return nil
}

// executable says whether the runtime can run path: the same bytes without the mode bits are as
// broken as a missing binary.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().Perm()&0o111 != 0
}

// writeNodeConfig keeps fstack-cni's node config what the chart says, and checks that the plugin
// will take it: owned by this installer's user (root on a node) and writable by it alone.
func (in *Installer) writeNodeConfig() error {
	if in.NodeConfig == "" {
		return nil
	}
	want, err := in.NodeConf.Encode()
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(in.NodeConfig); err != nil || !bytes.Equal(have, want) {
		if err := fsutil.WriteAtomic(in.NodeConfig, want, 0o644); err != nil {
			return fmt.Errorf("write fstack-cni's node config: %w", err)
		}
		in.Log.Info("installed", "path", in.NodeConfig)
	}
	if _, err := nodeconf.Load(in.NodeConfig, os.Getuid()); err != nil {
		return fmt.Errorf("fstack-cni would refuse its node config: %w", err)
	}
	return nil
}
