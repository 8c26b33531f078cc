package plugin

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/utils"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// podDirBeneath checks that dir is a pod directory directly beneath root: its name passes the
// check ADD makes of K8S_POD_UID. dir comes from CNI_ARGS or from a port's socket path.
func podDirBeneath(root, dir string) error {
	dir = filepath.Clean(dir)
	if filepath.Dir(dir) != filepath.Clean(root) {
		return fmt.Errorf("%s is not a directory directly in socketRoot %s", dir, root)
	}
	return validPodUID(filepath.Base(dir))
}

// validAttachment checks the names a device-info file claims with the checks the runtime's
// arguments pass in ADD, and that they agree with where the file is: a pod can write any
// document into its own directory, and these names become paths.
func validAttachment(at *podcontract.DevInfoAttachment, file, podDir string) error {
	if err := validContainerID(at.ContainerID); err != nil {
		return fmt.Errorf("attachment.containerID: %w", err)
	}
	if err := validIfName(at.IfName); err != nil {
		return fmt.Errorf("attachment.ifname: %w", err)
	}
	if file != podcontract.DevInfoFile(at.IfName) {
		return fmt.Errorf("attachment.ifname %q does not match the file name %s", at.IfName, file)
	}
	if at.PodUID != "" && at.PodUID != filepath.Base(podDir) {
		return fmt.Errorf("attachment.podUID %q does not match the directory %s", at.PodUID, podDir)
	}
	return nil
}

// validPortNames checks the names a port carries in external_ids before they name files.
func validPortNames(cid, ifname string) error {
	if err := validContainerID(cid); err != nil {
		return fmt.Errorf("external_ids %s: %w", podcontract.OVSIDContainerID, err)
	}
	if err := validIfName(ifname); err != nil {
		return fmt.Errorf("external_ids %s: %w", podcontract.OVSIDIfName, err)
	}
	return nil
}

// checkFiles is CHECK of the pod's link (or old pod directory) and its device info, read
// beneath the kubelet root (or the socket root).
func checkFiles(a *attachment) error {
	if a.PodDir == "" {
		return fmt.Errorf("pod socket directory: %w", a.podDirErr)
	}
	rd, err := fsutil.OpenDir(a.Root)
	if err != nil {
		return fmt.Errorf("socket root: %w", err)
	}
	defer rd.Close()
	pd, err := openFilesDir(rd, a)
	if err != nil {
		return err
	}
	defer pd.Close()
	info, err := podcontract.ReadDevInfoIn(pd, podcontract.DevInfoFile(a.IfName))
	if err != nil {
		return err
	}
	if !describes(info, a) {
		return fmt.Errorf("%s does not describe %s", pd.Join(podcontract.DevInfoFile(a.IfName)), describe(a))
	}
	return nil
}

// openFilesDir opens where a's files are: the pod directory of the hostPath layout, or the
// emptyDir the pod's link must lead to.
func openFilesDir(rd *fsutil.Dir, a *attachment) (*fsutil.Dir, error) {
	name := filepath.Base(a.PodDir)
	if isDir(rd, name) {
		pd, err := rd.OpenDir(name)
		if err != nil {
			return nil, fmt.Errorf("pod socket directory %s: %w", a.PodDir, err)
		}
		return pd, nil
	}
	target, err := rd.Readlink(name)
	if err != nil {
		return nil, fmt.Errorf("the pod's link %s: %w", a.PodDir, err)
	}
	if target != a.Volume {
		return nil, fmt.Errorf("the pod's link %s leads to %s, want %s", a.PodDir, target, a.Volume)
	}
	vd, err := openVolume(a)
	if err != nil {
		return nil, volumeError(a, err)
	}
	return vd, nil
}

// jsonFiles lists the device-info candidates of a pod directory.
func jsonFiles(names []string) []string {
	var files []string
	for _, n := range names {
		if strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			files = append(files, n)
		}
	}
	return files
}

// validContainerID applies ADD's check of CNI_CONTAINERID (the CNI library's, as skel runs it)
// to a name read from elsewhere: a file a pod can write, or OVSDB.
func validContainerID(id string) error {
	if e := utils.ValidateContainerID(id); e != nil {
		return fmt.Errorf("%s %q", e.Msg, id)
	}
	return nil
}

// validIfName applies ADD's check of CNI_IFNAME to a name read from elsewhere.
func validIfName(name string) error {
	if e := utils.ValidateInterfaceName(name); e != nil {
		return fmt.Errorf("%s (%q)", e.Msg, name)
	}
	return nil
}
