package podcontract

import (
	"bytes"
	"strings"
	"testing"
)

// Device info is read from pod directories, which the pod can write: Parse must hold up against
// any bytes, what it accepts must survive Encode and Parse unchanged, and what it refuses it
// refuses naming the member.
func FuzzParseDevInfo(f *testing.F) {
	good, _ := EncodeDevInfo(sampleDevInfo())
	f.Add(good)
	for _, s := range []string{
		`{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/kube-fstack/vhost/net1.sock"}}`,
		`{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/p"},"ips":["10.0.0.1/24","fd00::1/64"],"mtu":9000,"queues":16,"queueSize":32768,"attachment":{"network":"n","containerID":"../x","ifname":"../../victim/secret"}}`,
		`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:00:01.0"}}`,
		`{"type":"vhost-user","vhost-user":null}`, `{"type":"vhost-user","vhost-user":{"mode":"x","path":"/a"}}`,
		`null`, `[]`, `{"mtu":"1500"}`, `{"ips":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseDevInfo(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "devinfo: ") {
				t.Fatalf("error %q does not say it is about device info", err)
			}
			return
		}
		if info.Type != DevInfoTypeVhostUser || info.VhostUser == nil || info.VhostUser.Path == "" {
			t.Fatalf("Parse accepted %q without what readers rely on: %+v", data, info)
		}
		enc, err := EncodeDevInfo(info)
		if err != nil {
			t.Fatalf("Encode of an accepted document: %v", err)
		}
		again, err := ParseDevInfo(enc)
		if err != nil {
			t.Fatalf("Parse of what Encode wrote: %v", err)
		}
		// Encode is canonical (an empty list and a missing one are the same document).
		if enc2, _ := EncodeDevInfo(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip of %q:\n%s\n%s", data, enc, enc2)
		}
	})
}

// Validate's refusals name the member a writer got wrong.
func TestDevInfoValidateNamesTheMember(t *testing.T) {
	for body, member := range map[string]string{
		`{"type":"pci"}`: "type", `{"type":"vhost-user"}`: "vhost-user.path",
		`{"type":"vhost-user","vhost-user":{"path":"/a","mode":"x"}}`: "vhost-user.mode",
		`{"type":"vhost-user","mtu":"x"}`:                             "mtu",
	} {
		if _, err := ParseDevInfo([]byte(body)); err == nil || !strings.Contains(err.Error(), member) {
			t.Errorf("%s: %v, want an error naming %s", body, err, member)
		}
	}
}
