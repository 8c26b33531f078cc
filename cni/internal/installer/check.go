package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
)

// Check reports whether the node is as Once leaves it, writing nothing: the installed fstack-cni
// byte for byte the image's, the node config what the chart says and one fstack-cni takes, and
// the plugin's entry in the conflist. The DaemonSet's probes run it, so a ready installer pod
// means a node whose next pod can be given a port, not only a process that started.
func (in *Installer) Check() error {
	var errs []error
	if err := in.checkBinary(); err != nil {
		errs = append(errs, err)
	}
	if err := in.checkNodeConfig(); err != nil {
		errs = append(errs, err)
	}
	if err := in.checkConflist(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (in *Installer) checkBinary() error {
	dst := filepath.Join(in.BinDir, filepath.Base(in.Source))
	same, err := sameContent(in.Source, dst)
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("%s is not this image's fstack-cni", dst)
	}
	if !executable(dst) {
		return fmt.Errorf("%s is not executable", dst)
	}
	return nil
}

// sameContent compares the image's binary with the installed one a block at a time: the probe
// runs in the installer container's memory limit beside the installer, so it holds no whole copy.
func sameContent(src, dst string) (bool, error) {
	a, err := os.Open(src)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", src, err)
	}
	defer a.Close()
	b, err := os.Open(dst)
	if err != nil {
		return false, fmt.Errorf("fstack-cni is not installed: %w", err)
	}
	defer b.Close()
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, errA := io.ReadFull(a, bufA)
		nb, errB := io.ReadFull(b, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		endA, endB := atEnd(errA), atEnd(errB)
		if endA || endB {
			return endA && endB, nil
		}
		if errA != nil {
			return false, fmt.Errorf("read %s: %w", src, errA)
		}
		if errB != nil {
			return false, fmt.Errorf("read %s: %w", dst, errB)
		}
	}
}

// atEnd says whether io.ReadFull stopped at the end of the file.
func atEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func (in *Installer) checkNodeConfig() error {
	if in.NodeConfig == "" {
		return nil
	}
	want, err := in.NodeConf.Encode()
	if err != nil {
		return err
	}
	have, err := os.ReadFile(in.NodeConfig)
	if err != nil {
		return fmt.Errorf("fstack-cni's node config is not written: %w", err)
	}
	if !bytes.Equal(have, want) {
		return fmt.Errorf("fstack-cni's node config %s is not the chart's", in.NodeConfig)
	}
	if _, err := nodeconf.Load(in.NodeConfig, os.Getuid()); err != nil {
		return fmt.Errorf("fstack-cni would refuse its node config: %w", err)
	}
	return nil
}

func (in *Installer) checkConflist() error {
	if in.Conflist == "" {
		return nil
	}
	var entry map[string]any
	if err := json.Unmarshal(in.Plugin, &entry); err != nil || entry["type"] == nil {
		return fmt.Errorf("plugin config must be a JSON object with a type: %s", in.Plugin)
	}
	// readConflist answers a missing file with a new, empty conflist: that is not installed.
	if _, err := os.Stat(in.Conflist); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the conflist %s is not written", in.Conflist)
	}
	list, err := readConflist(in.Conflist)
	if err != nil {
		return err
	}
	plugins, _ := list["plugins"].([]any)
	if _, changed := mergeEntry(plugins, entry); changed {
		return fmt.Errorf("the conflist %s does not chain this fstack-cni entry", in.Conflist)
	}
	return nil
}
