package devinfo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Info {
	return &Info{
		Type: TypeVhostUser, Version: SpecVersion,
		VhostUser: &VhostUser{Mode: ModeServer, Path: "/var/run/kube-fstack/vhost/net1.sock"},
		MAC:       "0a:58:00:00:00:01", IPs: []string{"10.1.0.5/24"}, Gateway: "10.1.0.1",
		MTU: 1500, Queues: 1, QueueSize: 256,
		Attachment: &Attachment{Network: "fstack", ContainerID: "c1", IfName: "net1", PodUID: "u1"},
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "net1.json")
	if err := Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.VhostUser.Path != sample().VhostUser.Path || got.IPs[0] != "10.1.0.5/24" || got.Attachment.ContainerID != "c1" {
		t.Fatalf("round trip lost data: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

// The NPWG spec fixes these member names; Multus and other readers match on them.
func TestWireNamesFollowNPWGSpec(t *testing.T) {
	data, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"vhost-user"`, `"version":"1.1.0"`, `"vhost-user":{"mode":"server","path":"/var/run/kube-fstack/vhost/net1.sock"}`, `"queueSize":256`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %s", data, want)
		}
	}
}

func TestReadRejectsWhatTheDataplaneCannotUse(t *testing.T) {
	cases := map[string]string{
		"wrong type":   `{"type":"pci","version":"1.1.0","pci":{}}`,
		"no path":      `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server"}}`,
		"bad mode":     `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"x","path":"/a"}}`,
		"not json":     `{`,
		"no vhostuser": `{"type":"vhost-user","version":"1.1.0"}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(path); err == nil {
				t.Fatalf("Read accepted %s", body)
			}
		})
	}
}

func TestWriteRefusesInvalidInfo(t *testing.T) {
	bad := sample()
	bad.VhostUser = nil
	path := filepath.Join(t.TempDir(), "x.json")
	if err := Write(path, bad); err == nil {
		t.Fatal("Write accepted an attachment without a socket path")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused Write left %s", path)
	}
}

// A writer killed mid-write leaves its temp file; cleaners find it by name or by TempPattern,
// and the next Write of the same path reuses it instead of leaving a second one.
func TestTempFileOfAKilledWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net1.json")
	tmp := TempFor(path)
	if match, _ := filepath.Match(TempPattern, filepath.Base(tmp)); !match || filepath.Dir(tmp) != filepath.Dir(path) {
		t.Fatalf("temp %s is not in %s or does not match %s", tmp, filepath.Dir(path), TempPattern)
	}
	if err := os.WriteFile(tmp, []byte(`{"type":"vhost-us`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file still there after Write: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("written file has mode %v, want 0644", st.Mode().Perm())
	}
}
