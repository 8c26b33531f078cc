package nodecheck

import (
	"bytes"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// seccompLimit bounds the read of the installed profile: the real one is about 10 KiB.
const seccompLimit = 256 << 10

// seccompProfile checks that the dataplane's Localhost profile in dir is the one the agent makes.
// The kubelet refuses to start a container whose profile is missing, and an edited one could
// allow what the dataplane must not do, so anything else fails.
func seccompProfile(dir string, want []byte) Check {
	c := Check{Name: "seccomp-profile", Status: Fail, Label: fsv1.NodeLabelSeccomp}
	fix := "the node agent writes it at each period: check the agent's log and its mount of the kubelet's seccomp directory"
	if dir == "" || len(want) == 0 {
		c.Detail, c.Fix = "no seccomp directory configured", "set the chart value cni.nodeAgent.kubeletDir"
		return c
	}
	d, err := fsutil.OpenDir(dir)
	if err != nil {
		c.Detail, c.Fix = errDetail(dir, err), fix
		return c
	}
	defer d.Close()
	got, err := d.ReadFile(podcontract.SeccompProfileFile, seccompLimit)
	switch {
	case err != nil:
		c.Detail, c.Fix = errDetail(podcontract.SeccompLocalhostProfile, err), fix
	case !bytes.Equal(got, want):
		c.Detail, c.Fix = podcontract.SeccompLocalhostProfile+" differs from the profile the agent makes", fix
	default:
		c.Status, c.Detail = Pass, podcontract.SeccompLocalhostProfile+": the runtime's default profile plus the NUMA memory-policy calls"
	}
	return c
}
