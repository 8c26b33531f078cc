package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The pod's socket directory is its emptyDir VhostVolume: the kubelet makes it before it asks
// for the sandbox (so before ADD) and removes it with the pod, and with it whatever the pod
// planted there. Its host path (<kubeletRootDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/
// fstack-vhost, about 113 bytes) leaves no room in sun_path for a socket name, so OVS reaches it
// through <socketRoot>/<uid>, a symlink ADD makes in the socket root, which no pod mounts any
// more. The link's target is computed from the configured kubelet root and the validated
// K8S_POD_UID only, never read from anything a pod wrote; the plugin itself never goes through
// the link: it opens the emptyDir beneath the kubelet root, component by component (fsutil: no
// symlink, no "..").
//
// Residual risk, not closed here: the pod owns its emptyDir, so it can replace <ifname>.sock with
// a symlink, and OVS (root, following it) then connects to whatever unix socket that names on the
// host. The hostPath layout before had the same hole. OVS only connects as a vhost-user client
// there; the pod learns nothing through the files the plugin writes.

// emptyDirPlugin is the kubelet's directory of emptyDir volumes in a pod's volumes directory.
const emptyDirPlugin = "kubernetes.io~empty-dir"

// volumeRel is where the kubelet keeps the pod's VhostVolume, relative to its root dir.
func volumeRel(uid string) string {
	return filepath.Join("pods", uid, "volumes", emptyDirPlugin, podcontract.VhostVolume)
}

// openVolume opens a's emptyDir beneath the kubelet root.
func openVolume(a *attachment) (*fsutil.Dir, error) {
	kd, err := fsutil.OpenDir(a.KubeletRoot)
	if err != nil {
		return nil, err
	}
	defer kd.Close()
	return kd.OpenDir(volumeRel(filepath.Base(a.PodDir)))
}

// checkVolume tells, before ADD takes anything, whether the pod has the emptyDir.
func checkVolume(a *attachment) error {
	if a.PodDir == "" {
		return fmt.Errorf("pod socket directory: %w", a.podDirErr)
	}
	vd, err := openVolume(a)
	if err != nil {
		return volumeError(a, err)
	}
	return vd.Close()
}

func volumeError(a *attachment, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("pod %s/%s (uid %s) has no emptyDir volume %s at %s: fstack-cni serves only pods the kube-fstack "+
			"injector prepared (a pod labelled kubefstack.io/stack in a namespace labelled kubefstack.io/injection=enabled; a pod "+
			"created before the upgrade to the emptyDir layout must be re-created), and kubeletRootDir %q must be the kubelet's --root-dir (%w)",
			a.Pod.Namespace, a.Pod.Name, filepath.Base(a.PodDir), podcontract.VhostVolume, a.Volume, a.KubeletRoot, err)
	}
	return fmt.Errorf("open the pod's emptyDir %s: %w", a.Volume, err)
}

// linkPod makes <socketRoot>/<uid> lead to the pod's emptyDir. A link of another target (made
// under another kubeletRootDir) is replaced; anything else at the name is not the plugin's.
func linkPod(rd *fsutil.Dir, a *attachment) error {
	name := filepath.Base(a.PodDir)
	err := rd.Symlink(a.Volume, name)
	if err == nil || !errors.Is(err, unix.EEXIST) {
		return err
	}
	cur, ours := linkTarget(rd, name)
	switch {
	case ours && cur == a.Volume:
		return nil
	case ours:
		if err := rd.Remove(name); err != nil {
			return err
		}
		return rd.Symlink(a.Volume, name)
	}
	return fmt.Errorf("%s exists and is not a link fstack-cni made (a pod directory of the hostPath layout is removed by its pod's DEL); remove it", a.PodDir)
}

// linkTarget reads the link name in the socket root and says whether it is one the plugin makes:
// to the VhostVolume of the pod the name is the UID of, under some kubelet root (one made under an
// earlier kubeletRootDir included). Anything else there was put by someone else, and stays.
func linkTarget(rd *fsutil.Dir, name string) (string, bool) {
	target, err := rd.Readlink(name)
	if err != nil {
		return "", false
	}
	return target, filepath.IsAbs(target) && filepath.Clean(target) == target && strings.HasSuffix(target, "/"+volumeRel(name))
}

// removeLinked undoes the link layout's part of writeFiles for a, under the root lock: the
// attachment's own device info and socket in the emptyDir, then the link unless the emptyDir
// still holds another attachment's device info (another network, or a newer sandbox of the pod).
func removeLinked(rd *fsutil.Dir, a *attachment) error {
	if vd, err := openVolume(a); err == nil {
		_, err = removeAttachmentFiles(vd, a)
		vd.Close()
		if err != nil {
			return err
		}
	}
	return unlinkUnlessHeld(rd, a)
}

// removeAttachmentFiles removes a's device info (when it describes a) and its socket from pd.
func removeAttachmentFiles(pd *fsutil.Dir, a *attachment) (removed bool, err error) {
	switch ownership(pd, a) {
	case owned:
		if err := pd.Remove(podcontract.DevInfoFile(a.IfName)); err != nil {
			return false, err
		}
		removed = true
		fallthrough
	case absent:
		if err := removeSocket(pd, podcontract.VhostSocketFile(a.IfName)); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// unlinkUnlessHeld removes a's link when the pod's emptyDir is gone (the kubelet removed the
// pod) or holds no device info. A pod can keep its own link by planting a device info, but only
// for as long as the kubelet keeps its emptyDir: then GC finds the link dangling.
func unlinkUnlessHeld(rd *fsutil.Dir, a *attachment) error {
	if vd, err := openVolume(a); err == nil {
		held := holdsDevInfo(vd)
		vd.Close()
		if held {
			return nil
		}
	}
	name := filepath.Base(a.PodDir)
	if _, ours := linkTarget(rd, name); !ours {
		return nil // gone, or not the plugin's
	}
	return rd.Remove(name)
}

// holdsDevInfo reports whether pd holds a device-info file of another attachment. It runs under
// the node-wide root lock, which every ADD and DEL of the node waits for, in a directory the pod
// fills as it likes: so it looks only at names the plugin could have written (<ifname>.json, a
// valid interface name), among the first maxHeldScan entries, and reads at most maxHeldReads of
// them (each at most podcontract.DevInfoMaxSize). A directory with more than that is taken as
// held: the link stays, which costs nothing but the link itself until the kubelet removes the
// emptyDir with the pod, when GC removes it. Only the pod that planted them is affected.
func holdsDevInfo(pd *fsutil.Dir) bool {
	names, complete, err := namesUpTo(pd, maxHeldScan)
	if err != nil {
		return false
	}
	reads := 0
	for _, f := range jsonFiles(names) {
		if validIfName(strings.TrimSuffix(f, ".json")) != nil {
			continue // not a name ADD writes
		}
		if reads == maxHeldReads {
			return true
		}
		reads++
		if info, err := readDevInfoIn(pd, f); err == nil && info.Attachment != nil {
			return true
		}
	}
	return !complete
}

// maxHeldScan and maxHeldReads bound holdsDevInfo: a pod has one device info per attachment
// (a network, or a newer sandbox), beside the sockets its DPDK makes.
const (
	maxHeldScan  = 256
	maxHeldReads = 8
)

// readDevInfoIn reads a device info; tests count the calls.
var readDevInfoIn = podcontract.ReadDevInfoIn

// namesUpTo lists at most n entries of d; complete says there are no more.
func namesUpTo(d *fsutil.Dir, n int) (names []string, complete bool, err error) {
	fd, err := unix.Openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	f := os.NewFile(uintptr(fd), d.Path())
	defer f.Close()
	names, err = f.Readdirnames(n + 1)
	if errors.Is(err, io.EOF) {
		return names, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(names) > n {
		return names[:n], false, nil
	}
	return names, true, nil
}

// isLink and isDir look at name in d without following it.
func isLink(d *fsutil.Dir, name string) bool {
	st, err := d.Lstat(name)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func isDir(d *fsutil.Dir, name string) bool {
	st, err := d.Lstat(name)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}
