package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// readLimit bounds every file read; sysfs files report a size of one page.
const readLimit = 64 << 10

// OVS answers what the bridge checks ask OVSDB.
type OVS interface {
	// BridgeDatapath is the datapath_type of bridge; found is false when there is no such bridge.
	// An error means OVSDB did not answer.
	BridgeDatapath(ctx context.Context, bridge string) (datapath string, found bool, err error)
	// BridgeFacts is what the kernel-TCP checks need of the bridge and OVS's settings.
	BridgeFacts(ctx context.Context, bridge string) (*BridgeFacts, error)
}

// Config says where the node's files are. Every root is a directory the agent trusts (a mount of
// the host's); nothing beneath one is followed through a symlink or "..".
type Config struct {
	// Root holds sys/ and proc/ (the container's "/" in the agent: sysfs and /proc/sys show the
	// host's hugepages, IOMMU groups, modules and kernel.randomize_va_space).
	Root string
	// KubeletDir is the host's kubelet root dir (cpu_manager_state).
	KubeletDir string
	// SocketRootParent is the host directory that holds the vhost-user socket root, mounted so a
	// symlink at SocketRootName can be seen (a mount of the root itself would follow it).
	SocketRootParent string
	SocketRootName   string
	// Bridge is the OVS bridge fstack-cni adds ports to; OVS asks OVSDB about it.
	Bridge string
	OVS    OVS
	// Links lists the node's interfaces (the agent runs in the host's network namespace), to
	// find the kernel senders behind the bridge's ports; nil skips that check.
	Links Links
	// SeccompDir is the kubelet's seccomp directory of the project
	// (<kubelet root>/seccomp/<podcontract.SeccompProfileDir>), and SeccompProfile the profile the
	// node agent keeps there; an empty SeccompDir fails the check.
	SeccompDir     string
	SeccompProfile []byte
	// Allocatable is the Node's status.allocatable; nil skips the kubelet side of the
	// hugepages checks. With Capacity (status.capacity) it counts the CPUs the kubelet reserves.
	Allocatable corev1.ResourceList
	Capacity    corev1.ResourceList
	// KubeletReservedCPUs is the kubelet's reservedSystemCPUs (a CPU list) when the platform set
	// it; "" has the PMD check take the kubelet's own pick of ceil(capacity - allocatable) CPUs.
	KubeletReservedCPUs string
}

// Run performs every check.
func Run(ctx context.Context, cfg *Config) *Report {
	r := &Report{}
	values := map[string]string{}
	root, err := fsutil.OpenDir(cfg.Root)
	if err != nil {
		root = nil // the PMD check reads the CPU topology through it, and does without
		r.Checks = append(r.Checks, Check{Name: "root", Status: Fail, Detail: err.Error(),
			Fix: "the node agent needs the node's /sys and /proc; check its container"})
	} else {
		defer root.Close()
		r.Checks = append(r.Checks, hugePages(root, cfg.Allocatable)...)
		r.Checks = append(r.Checks, cgroupVersion(root, values), aslr(root, values), vfio(root))
	}
	r.Checks = append(r.Checks, cpuManager(cfg.KubeletDir))
	bridgeChecks := bridge(ctx, cfg)
	r.Checks = append(r.Checks, bridgeChecks...)
	facts, factsErr := bridgeFacts(ctx, cfg, bridgeChecks[0].Status == Pass)
	r.Checks = append(r.Checks, switchChecks(root, cfg, facts, factsErr, bridgeChecks[1].Status == Pass)...)
	r.Checks = append(r.Checks, kernelTCPChecks(cfg, facts, factsErr, bridgeChecks[1].Status == Pass)...)
	r.Checks = append(r.Checks, socketRoot(cfg.SocketRootParent, cfg.SocketRootName))
	r.Checks = append(r.Checks, seccompProfile(cfg.SeccompDir, cfg.SeccompProfile))
	r.label(values)
	return r
}

// readTrimmed reads a small file beneath d.
func readTrimmed(d *fsutil.Dir, rel string) (string, error) {
	b, err := d.ReadFile(rel, readLimit)
	return strings.TrimSpace(string(b)), err
}

// notExist says whether err means the file is not there (the feature is absent).
func notExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// quantity is n as a Kubernetes quantity string, e.g. 2Mi.
func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

func errDetail(what string, err error) string { return fmt.Sprintf("%s: %v", what, err) }
