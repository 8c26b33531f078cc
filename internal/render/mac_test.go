package render_test

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// One MAC on both sides of a vhost-user port: fstack-cni's anti-spoofing rules pass only the
// attachment's MAC, so a spec MAC that differs from the device info's is refused with the field
// and both values; the same MAC in another form, or none in the spec, renders.
func TestVhostUserMACMustBeTheAttachments(t *testing.T) {
	facts := func(mac string) *render.Facts {
		return &render.Facts{DataplaneCPUs: []int{2, 3}, AppCPUs: []int{4},
			Attachments: map[string]render.Attachment{"net1": {SocketPath: "/var/run/kube-fstack/vhost/net1.sock", MAC: mac}}}
	}
	si := fixtures.Stack(t, "vhost-user")
	_, err := render.RenderRaw(&si.Spec, facts("02:aa:bb:cc:dd:ee"))
	if err == nil || !strings.Contains(err.Error(), "spec.ports[0].device.vhostUser.mac") ||
		!strings.Contains(err.Error(), "02:aa:bb:cc:dd:ee") || !strings.Contains(err.Error(), "drops frames") {
		t.Fatalf("a spec MAC unlike the attachment's: want a refusal naming the field and the attachment's MAC, got %v", err)
	}
	if _, err := render.RenderRaw(&si.Spec, facts(strings.ToUpper(si.Spec.Ports[0].Device.VhostUser.MAC))); err != nil {
		t.Fatalf("the same MAC in upper case: %v", err)
	}
	si.Spec.Ports[0].Device.VhostUser.MAC = ""
	res, err := render.RenderRaw(&si.Spec, facts("02:aa:bb:cc:dd:ee"))
	if err != nil || !strings.Contains(string(res.Config), "02:aa:bb:cc:dd:ee") {
		t.Fatalf("no spec MAC: want the attachment's in the config, got %v", err)
	}
}
