package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kube-fstack/kube-fstack/cni/pkg/devinfo"
)

// withRootLock serialises directory creation and removal under the socket root, so a DEL or GC
// emptying a pod directory cannot remove it under an ADD that is about to fill it.
func withRootLock(root string, fn func() error) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("create socket root: %w", err)
	}
	f, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("open socket root: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock socket root: %w", err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks anyway
	return fn()
}

// writeFiles creates the pod directory and writes the device info into it and to the NPWG
// location. A stale socket is removed: the pod's DPDK server cannot bind over it.
func writeFiles(root string, a *attachment, info *devinfo.Info) error {
	return withRootLock(root, func() error {
		if err := os.MkdirAll(a.PodDir, 0o755); err != nil {
			return fmt.Errorf("create pod socket directory: %w", err)
		}
		if err := removeIfExists(a.Socket); err != nil {
			return err
		}
		data, err := devinfo.Encode(info)
		if err != nil {
			return err
		}
		if err := devinfo.WriteEncoded(a.devInfoInPodDir(), data); err != nil {
			return err
		}
		return devinfo.WriteEncoded(a.DevInfoFile, data)
	})
}

// removeFiles undoes writeFiles for this attachment only: a pod directory shared with another
// attachment, or a file a newer sandbox of the same pod wrote, is left alone.
func removeFiles(root string, a *attachment) error {
	err := errors.Join(removeIfExists(a.DevInfoFile), removeIfExists(devinfo.TempFor(a.DevInfoFile)))
	if a.PodDir == "" {
		return err
	}
	return errors.Join(err, withRootLock(root, func() error {
		if !ownedBy(a.devInfoInPodDir(), a.ContainerID) {
			return nil
		}
		return errors.Join(removeIfExists(a.devInfoInPodDir()), removeIfExists(devinfo.TempFor(a.devInfoInPodDir())),
			removeIfExists(a.Socket), removePodDir(a.PodDir))
	}))
}

// removePodDir removes the pod directory once its last attachment is gone. Temp files of
// device-info writes killed half-way would keep it: they are looked for (a directory read) only
// when it is not empty.
func removePodDir(dir string) error {
	err := syscall.Rmdir(dir)
	switch {
	case err == nil || errors.Is(err, syscall.ENOENT):
		return nil
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
		removeStaleTemps(dir)
		return removeDirIfEmpty(dir)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// removeStaleTemps deletes the temp files of device-info writes that were killed half-way in a
// pod directory (small: one pod's interfaces). Every write happens under the root lock the
// caller holds, so none of them is in progress.
func removeStaleTemps(dirs ...string) {
	for _, dir := range dirs {
		temps, _ := filepath.Glob(filepath.Join(dir, devinfo.TempPattern))
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}
}

// ownedBy reports whether the pod-dir device info is absent or belongs to containerID.
func ownedBy(path, containerID string) bool {
	info, err := devinfo.Read(path)
	if err != nil {
		return true // absent, or unreadable and so of no use to anyone
	}
	return info.Attachment == nil || info.Attachment.ContainerID == containerID
}

// removeIfExists removes a file; a missing one is success. It unlinks first: os.Remove of a
// missing file also tries rmdir, a second system call for the usual case.
func removeIfExists(path string) error {
	err := syscall.Unlink(path)
	if err == nil || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func removeDirIfEmpty(dir string) error {
	err := os.Remove(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// podDirs lists the pod directories under the socket root.
func podDirs(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	return dirs, nil
}
