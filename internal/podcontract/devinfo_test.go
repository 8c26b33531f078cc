package podcontract

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleDevInfo() *DevInfo {
	return &DevInfo{
		Type: DevInfoTypeVhostUser, Version: DevInfoVersion,
		VhostUser: &DevInfoVhostUser{Mode: VhostUserModeServer, Path: "/var/run/kube-fstack/vhost/net1.sock"},
		MAC:       "0a:58:00:00:00:01", IPs: []string{"10.1.0.5/24"}, Gateway: "10.1.0.1",
		MTU:        1500,
		Attachment: &DevInfoAttachment{Network: "fstack", ContainerID: "c1", IfName: "net1", PodUID: "u1"},
	}
}

func TestDevInfoWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "net1.json")
	if err := WriteDevInfo(path, sampleDevInfo()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDevInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.VhostUser.Path != sampleDevInfo().VhostUser.Path || got.IPs[0] != "10.1.0.5/24" || got.Attachment.ContainerID != "c1" {
		t.Fatalf("round trip lost data: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

// The NPWG spec fixes these member names; Multus and other readers match on them.
func TestWireNamesFollowNPWGSpec(t *testing.T) {
	data, err := json.Marshal(sampleDevInfo())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"vhost-user"`, `"version":"1.1.0"`, `"vhost-user":{"mode":"server","path":"/var/run/kube-fstack/vhost/net1.sock"}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %s", data, want)
		}
	}
}

func TestReadDevInfoRejectsWhatTheDataplaneCannotUse(t *testing.T) {
	cases := map[string]string{
		"wrong type":   `{"type":"pci","version":"1.1.0","pci":{}}`,
		"no path":      `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server"}}`,
		"bad mode":     `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"x","path":"/a"}}`,
		"not json":     `{`,
		"no vhostuser": `{"type":"vhost-user","version":"1.1.0"}`,
		// The pod can write this file; the path reaches the EAL's virtio_user devargs verbatim.
		"devargs in path":      `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/v/net1.sock,queues=8"}}`,
		"ini comment":          `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/v/net1.sock;x"}}`,
		"relative path":        `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"v/net1.sock"}}`,
		"unclean path":         `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/v/../etc/net1.sock"}}`,
		"negative switch CPU":  `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/v/a.sock"},"switchCPUs":[-1]}`,
		"switch CPU too large": `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/v/a.sock"},"switchCPUs":[8192]}`,
		"switch CPUs unsorted": `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/v/a.sock"},"switchCPUs":[3,1]}`,
		"newline in path":      "{\"type\":\"vhost-user\",\"version\":\"1.1.0\",\"vhost-user\":{\"mode\":\"client\",\"path\":\"/v/a\\n[port9]\"}}",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadDevInfo(path); err == nil {
				t.Fatalf("Read accepted %s", body)
			}
		})
	}
}

func TestWriteDevInfoRefusesInvalidInfo(t *testing.T) {
	bad := sampleDevInfo()
	bad.VhostUser = nil
	path := filepath.Join(t.TempDir(), "x.json")
	if err := WriteDevInfo(path, bad); err == nil {
		t.Fatal("Write accepted an attachment without a socket path")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused Write left %s", path)
	}
}

// The old writer used a fixed temp name and followed a symlink planted there, then made its
// target world-readable: Write must replace, never write through, whatever is at either name.
func TestWriteDevInfoNeverFollowsSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "net1.json")
	for _, link := range []string{path, filepath.Join(dir, ".devinfo-net1.json.tmp")} {
		if err := os.Symlink(secret, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteDevInfo(path, sampleDevInfo()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(secret)
	if got, _ := os.ReadFile(secret); err != nil || string(got) != "secret" || st.Mode().Perm() != 0o600 {
		t.Fatalf("the symlinks' target changed: %q %v %v", got, st, err)
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != DevInfoFileMode {
		t.Fatalf("%s: %v %v, want a regular file of mode %v", path, st, err, os.FileMode(DevInfoFileMode))
	}
	if _, err := ReadDevInfo(filepath.Join(dir, ".devinfo-net1.json.tmp")); err == nil {
		t.Fatal("Read followed a symlink")
	}
}

// fstack-cni before the StackInstance owned the queue layout wrote queues and queueSize into every
// device info; the files of pods attached then still have them and still read.
func TestDevInfoOfAnOlderPluginStillReads(t *testing.T) {
	old := `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/kube-fstack/vhost/net1.sock"},` +
		`"mac":"0a:58:00:00:00:01","ips":["10.1.0.5/24"],"mtu":1500,"queues":1,"queueSize":256}`
	info, err := ParseDevInfo([]byte(old))
	if err != nil || info.MAC != "0a:58:00:00:00:01" || info.MTU != 1500 {
		t.Fatalf("ParseDevInfo(older plugin's document) = %+v, %v", info, err)
	}
}
