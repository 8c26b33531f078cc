package render

import (
	"slices"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// A server-mode attachment (fstack-cni's dpdkvhostuserclient ports: OVS is the client) makes the
// pod's virtio_user the vhost-user server. F-Stack has no key for it; the option rides on path.
func TestServerAttachmentRidesOnThePath(t *testing.T) {
	spec := &fsv1.StackInstanceSpec{Ports: []fsv1.PortSpec{{Name: "data", Attachment: "net1",
		Device:     fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}},
		Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.0.2/24", Gateway: "10.0.0.1"}}}}}
	for _, server := range []bool{true, false} {
		facts := &Facts{DataplaneCPUs: []int{1}, Attachments: map[string]Attachment{
			"net1": {SocketPath: "/var/run/kube-fstack/vhost/net1.sock", Server: server}}}
		res, err := RenderRaw(spec, facts)
		if err != nil {
			t.Fatal(err)
		}
		hasCfg := strings.Contains(string(res.Config), "path=/var/run/kube-fstack/vhost/net1.sock,server=1\n")
		hasEAL := slices.ContainsFunc(res.EAL[0], func(a string) bool {
			return strings.HasPrefix(a, "--vdev=virtio_user0,path=/var/run/kube-fstack/vhost/net1.sock,server=1")
		})
		if hasCfg != server || hasEAL != server {
			t.Errorf("server=%v: config has server=1: %v, EAL has it: %v\n%s\n%q", server, hasCfg, hasEAL, res.Config, res.EAL[0])
		}
	}
}
