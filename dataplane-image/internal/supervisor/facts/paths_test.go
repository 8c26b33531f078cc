package facts

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The injected dataplane container's root filesystem is read-only: every place the supervisor
// writes by default (and where the processes it starts write: DPDK's runtime directory, the
// hugepages, /tmp, the working directory for F-Stack's relative log files) must be a writable
// mount of that container, or the dataplane fails on its first write.
func TestDefaultWritePathsAreWritableMountsOfTheInjectedDataplane(t *testing.T) {
	for _, name := range []string{"nginx-vhost", "nginx-pci"} {
		pod := fixtures.LoadPod(t, name)
		stack := fixtures.Stacks(t)[inject.StackName(pod)]
		out, _, err := inject.Inject(pod, stack, inject.DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var dp *corev1.Container
		for i := range out.Spec.InitContainers {
			if out.Spec.InitContainers[i].Name == podcontract.DataplaneContainer {
				dp = &out.Spec.InitContainers[i]
			}
		}
		if dp == nil {
			t.Fatalf("%s: no %s init container", name, podcontract.DataplaneContainer)
		}
		if sc := dp.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: the dataplane's root filesystem is not read-only: %+v", name, sc)
		}
		p := DefaultPaths()
		writes := map[string]string{
			"config.ini":               filepath.Dir(p.ConfigFile),
			"DPDK's runtime directory": p.RuntimeDir,
			"the hugepages":            p.HugePagesDir,
			"the shim volume":          p.ShimDir,
			"stale vhost-user sockets": p.PodSocketDir,
			"/tmp":                     "/tmp",
			"the working directory":    dp.WorkingDir,
		}
		if name == "nginx-pci" {
			delete(writes, "stale vhost-user sockets") // no vhost-user port, no socket directory
		}
		for what, dir := range writes {
			if !writableMount(dp, dir) {
				t.Errorf("%s: %s (%q) is not on a writable mount of the dataplane container; mounts %+v", name, what, dir, dp.VolumeMounts)
			}
		}
	}
}

func writableMount(c *corev1.Container, dir string) bool {
	if dir == "" {
		return false
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly && (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")) {
			return true
		}
	}
	return false
}
