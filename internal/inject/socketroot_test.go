package inject

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The kubelet makes a directory on the node only for a hostPath volume (and, for a mount with
// subPathExpr, the expanded subdirectory beneath it). Before the socket directory became the
// pod's emptyDir, the dataplane mounted the socket root with subPathExpr $(POD_UID), so the
// kubelet made <socket root>/<pod UID> for every injected pod; a pod whose networks annotation
// never reached fstack-cni left it there, empty and unmarked, and GC (which removes only what
// the plugin made) never did. No injected pod declares a hostPath or a subPathExpr any more, so
// the kubelet makes nothing under the socket root: the only entries there are the plugin's links.
func TestInjectedPodsMakeTheKubeletCreateNothingUnderTheSocketRoot(t *testing.T) {
	stacks := fixtures.Stacks(t)
	injected := 0
	for _, name := range fixtures.PodNames() {
		pod := fixtures.LoadPod(t, name)
		stack := stacks[StackName(pod)]
		if stack == nil {
			continue
		}
		out, d, err := Inject(pod, stack, testConfig())
		if err != nil || d != Injected {
			continue
		}
		injected++
		for _, v := range out.Spec.Volumes {
			if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, testConfig().HostSocketRoot) {
				t.Errorf("%s: volume %s is a hostPath of %s", name, v.Name, v.HostPath.Path)
			}
		}
		for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.SubPathExpr != "" {
					t.Errorf("%s: container %s mounts %s with subPathExpr %q", name, c.Name, m.Name, m.SubPathExpr)
				}
			}
		}
	}
	if injected < 5 {
		t.Fatalf("only %d fixture pods were injected; the check saw too little", injected)
	}
}
