package plugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The socket root holds one link per pod (podlink.go) and, from before the emptyDir layout, pod
// directories that a pod's dataplane container (root) mounted read-write through a hostPath. So
// nothing in a pod directory or an emptyDir is trusted: each path below is resolved beneath a
// directory held open (fsutil.Dir: no symlink, no ".."), and only files the plugin made are
// removed. ADD makes only links now; DEL and GC still remove the old directories.

// PodDirMarker is the file ADD of the hostPath layout put in each pod directory it made. GC
// removes a pod directory only when it holds the marker and nothing else: an empty directory
// someone else made under the root is not ours.
const PodDirMarker = ".fstack-cni"

// withRootLock serialises directory creation and removal under the socket root, so a DEL or GC
// emptying a pod directory cannot remove it under an ADD that is about to fill it.
func withRootLock(root string, fn func(rd *fsutil.Dir) error) error {
	rd, err := fsutil.MkdirAllOpen(root, 0o755)
	if err != nil {
		return fmt.Errorf("open socket root: %w", err)
	}
	defer rd.Close()
	if err := lockDir(rd); err != nil {
		return err
	}
	return fn(rd) // closing the root unlocks
}

// lockDir takes the socket root's lock, which closing rd releases.
func lockDir(rd *fsutil.Dir) error {
	if err := syscall.Flock(rd.Fd(), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock socket root: %w", err)
	}
	return nil
}

// writeFiles links the pod's emptyDir into the socket root and writes the device info into the
// emptyDir and to the NPWG location. A stale socket is removed: the pod's DPDK server cannot bind
// over it.
func writeFiles(root string, a *attachment, info *podcontract.DevInfo) error {
	data, err := podcontract.EncodeDevInfo(info)
	if err != nil {
		return err
	}
	return withRootLock(root, func(rd *fsutil.Dir) error {
		if a.PodDir == "" {
			return fmt.Errorf("pod socket directory: %w", a.podDirErr)
		}
		vd, err := openVolume(a)
		if err != nil {
			return volumeError(a, err)
		}
		defer vd.Close()
		if err := linkPod(rd, a); err != nil {
			return err
		}
		if err := removeSocket(vd, podcontract.VhostSocketFile(a.IfName)); err != nil {
			return err
		}
		if err := vd.WriteAtomic(podcontract.DevInfoFile(a.IfName), data, podcontract.DevInfoFileMode); err != nil {
			return err
		}
		return fsutil.WriteAtomic(a.DevInfoFile, data, podcontract.DevInfoFileMode)
	})
}

// markPodDir creates the marker; one already there (a second interface of the pod) is fine.
func markPodDir(pd *fsutil.Dir) error {
	fd, err := unix.Openat(pd.Fd(), PodDirMarker, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s: %w", pd.Path(), err)
	}
	return unix.Close(fd)
}

// removeFiles undoes writeFiles for this attachment only: a device-info file that does not
// describe this attachment (another sandbox of the pod wrote it, or the pod planted it) stays.
// <socketRoot>/<uid> is the pod's link, or a pod directory of the hostPath layout.
func removeFiles(a *attachment) error {
	err := removeNPWG(a)
	if a.PodDir == "" {
		return err
	}
	return errors.Join(err, withRootLock(a.Root, func(rd *fsutil.Dir) error {
		if isDir(rd, filepath.Base(a.PodDir)) {
			return removeOldPodDir(rd, a)
		}
		return removeLinked(rd, a)
	}))
}

// removeOldPodDir removes a's files from a pod directory of the hostPath layout, and the
// directory when nothing but the plugin's files is left in it.
func removeOldPodDir(rd *fsutil.Dir, a *attachment) error {
	pd, err := rd.OpenDir(filepath.Base(a.PodDir))
	if err != nil {
		return nil // gone, or not a directory the plugin could have made
	}
	defer pd.Close()
	removed, err := removeAttachmentFiles(pd, a)
	if err != nil {
		return err
	}
	return removePodDir(rd, pd, filepath.Base(a.PodDir), removed)
}

// removeNPWG removes the NPWG device-info file when it is this attachment's: the path comes from
// the runtime (runtimeConfig.CNIDeviceInfoFile), and a DEL must not turn into "remove any file".
func removeNPWG(a *attachment) error {
	d, err := fsutil.OpenDir(filepath.Dir(a.DevInfoFile))
	if err != nil {
		return nil // no directory, no file
	}
	defer d.Close()
	name := filepath.Base(a.DevInfoFile)
	removeTemps(d, name)
	info, err := podcontract.ReadDevInfoIn(d, name)
	if err != nil || !describes(info, a) {
		return nil
	}
	return d.Remove(name)
}

// removeTemps removes the temp files an ADD killed inside WriteAtomic left for name in d (the
// node's device-info directory, which no pod writes): their names start with the writer's
// prefix for name, so they are this attachment's and nobody else's.
func removeTemps(d *fsutil.Dir, name string) {
	names, err := d.Names()
	if err != nil {
		return
	}
	prefix := fsutil.TempPrefix(name)
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && isRegular(d, n) {
			_ = d.Remove(n)
		}
	}
}

type owner int

const (
	absent owner = iota
	owned
	foreign
)

// ownership says whose the pod-dir device info of a is.
func ownership(pd *fsutil.Dir, a *attachment) owner {
	info, err := podcontract.ReadDevInfoIn(pd, podcontract.DevInfoFile(a.IfName))
	switch {
	case errors.Is(err, syscall.ENOENT):
		return absent
	case err != nil || !describes(info, a):
		return foreign
	}
	return owned
}

func describes(info *podcontract.DevInfo, a *attachment) bool {
	at := info.Attachment
	return at != nil && at.Network == a.Network && at.ContainerID == a.ContainerID && at.IfName == a.IfName
}

// removeSocket removes the vhost-user socket the pod's DPDK made, and nothing else of that name.
func removeSocket(pd *fsutil.Dir, name string) error {
	st, err := pd.Lstat(name)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil
	}
	return pd.Remove(name)
}

// removePodDir removes the pod directory once nothing but the marker is left in it (temp files
// of a write killed half-way go first). A directory without the marker goes only when the caller
// has just removed the attachment's device info from it (one made before the marker existed).
func removePodDir(rd, pd *fsutil.Dir, name string, removedOurs bool) error {
	names, err := pd.Names()
	if errors.Is(err, syscall.ENOENT) {
		return nil // removed meanwhile (GC removes an attachment's files, then looks again)
	}
	if err != nil {
		return err
	}
	marked, others := false, 0
	for _, n := range names {
		switch {
		case n == PodDirMarker:
			marked = true
		case (fsutil.IsTemp(n) || isOldTemp(n)) && isRegular(pd, n):
			_ = pd.Remove(n)
		default:
			others++
		}
	}
	if others > 0 || !marked && !removedOurs {
		return nil
	}
	if err := pd.Remove(PodDirMarker); err != nil {
		return err
	}
	if err := rd.Rmdir(name); err != nil {
		// The pod wrote into it meanwhile (it need not take our lock): keep it ours.
		return errors.Join(markPodDir(pd), ignoreNotEmpty(err))
	}
	return nil
}

// isOldTemp matches the fixed temp names of the writer before fsutil's (".devinfo-<name>.tmp").
func isOldTemp(name string) bool {
	return strings.HasPrefix(name, ".devinfo-") && strings.HasSuffix(name, ".tmp")
}

func isRegular(d *fsutil.Dir, name string) bool {
	st, err := d.Lstat(name)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

func ignoreNotEmpty(err error) error {
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return err
}
