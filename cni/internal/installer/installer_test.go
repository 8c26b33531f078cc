package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/logging"
)

func newInstaller(t *testing.T) *Installer {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "fstack-cni")
	if err := os.WriteFile(src, []byte("#!/bin/true\nv1"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Installer{Source: src, BinDir: filepath.Join(dir, "bin"), Conflist: filepath.Join(dir, "net.d", "10-kube.conflist"),
		Plugin: []byte(`{"type":"fstack-cni","bridge":"br-fstack"}`), Interval: 10 * time.Millisecond, Log: logging.Discard()}
}

func TestOnceInstallsBinaryAndMergesConflist(t *testing.T) {
	in := newInstaller(t)
	if err := os.MkdirAll(filepath.Dir(in.Conflist), 0o755); err != nil {
		t.Fatal(err)
	}
	prev := `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge","bridge":"cni0"},{"type":"fstack-cni","bridge":"old"}]}`
	if err := os.WriteFile(in.Conflist, []byte(prev), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Once(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(in.BinDir, "fstack-cni"))
	if err != nil || string(got) != "#!/bin/true\nv1" {
		t.Fatalf("binary not installed: %q %v", got, err)
	}
	if st, _ := os.Stat(filepath.Join(in.BinDir, "fstack-cni")); st.Mode().Perm() != 0o755 {
		t.Fatalf("binary mode %v, want 0755", st.Mode())
	}
	var list struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	data, _ := os.ReadFile(in.Conflist)
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	if list.Name != "k8s" || len(list.Plugins) != 2 || list.Plugins[0]["type"] != "bridge" || list.Plugins[1]["bridge"] != "br-fstack" {
		t.Fatalf("merge lost or duplicated entries: %s", data)
	}
}

func TestMergeCreatesConflistAndIsIdempotent(t *testing.T) {
	in := newInstaller(t)
	for range 2 {
		if err := MergeConflist(in.Conflist, in.Plugin); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(in.Conflist)
	if bytes.Count(data, []byte(`"fstack-cni"`)) != 1 {
		t.Fatalf("want exactly one fstack-cni entry: %s", data)
	}
	if err := MergeConflist(in.Conflist, []byte(`{"bridge":"x"}`)); err == nil {
		t.Fatal("a plugin without type was accepted")
	}
}

func TestRunReinstallsWhatWasRemovedAndStopsOnCancel(t *testing.T) {
	in := newInstaller(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	dst := filepath.Join(in.BinDir, "fstack-cni")
	waitExists(t, dst)
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	waitExists(t, dst)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v on cancel, want nil", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(in.BinDir, ".*tmp*"))
	if len(leftovers) != 0 {
		t.Fatalf("temp files left: %v", leftovers)
	}
}

func waitExists(t *testing.T, path string) {
	t.Helper()
	for range 1000 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// The installer writes fstack-cni's node config (the node's paths and namespaces, from the
// chart) as a file the plugin takes: owned by the installer's user, mode 0644; it puts back
// what someone changed, and says so when the plugin would refuse the file.
func TestOnceWritesTheNodeConfig(t *testing.T) {
	in := newInstaller(t)
	in.Conflist = ""
	etc := filepath.Join(t.TempDir(), "etc-kube-fstack")
	mustMkdir(t, etc)
	in.NodeConfig = filepath.Join(etc, "cni.json")
	in.NodeConf = &nodeconf.Conf{SocketRoot: "/var/run/kube-fstack/vhost", LogFile: "/var/log/x.log", Namespaces: []string{"web"}}
	for range 2 {
		if err := in.Once(); err != nil {
			t.Fatal(err)
		}
		got, err := nodeconf.Load(in.NodeConfig, os.Getuid())
		if err != nil || got.LogFile != "/var/log/x.log" || !got.Serves("web") || got.Serves("other") || got.OVSDBSocket != nodeconf.DefaultOVSDBSocket {
			t.Fatalf("node config %+v, %v", got, err)
		}
		if err := os.WriteFile(in.NodeConfig, []byte(`{"namespaces":["other"]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := os.Stat(in.NodeConfig); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode())
	}
	if err := os.Chmod(etc, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := in.Once(); err == nil || !strings.Contains(err.Error(), "would refuse its node config") {
		t.Fatalf("a world-writable directory: got %v, want the installer to say the plugin refuses it", err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// Check is what the DaemonSet's probes run: it passes on a node Once made right, and names each
// thing that is missing or not the image's, without putting anything back.
func TestCheckPassesOnlyOnAnInstalledNode(t *testing.T) {
	in := newInstaller(t)
	etc := filepath.Join(t.TempDir(), "etc-kube-fstack")
	mustMkdir(t, etc)
	in.NodeConfig = filepath.Join(etc, "cni.json")
	in.NodeConf = &nodeconf.Conf{SocketRoot: "/var/run/kube-fstack/vhost", LogFile: "/var/log/x.log", Namespaces: []string{"web"}}
	if err := in.Check(); err == nil || !strings.Contains(err.Error(), "not installed") ||
		!strings.Contains(err.Error(), "node config is not written") || !strings.Contains(err.Error(), "conflist") {
		t.Fatalf("before any install: got %v, want the binary, node config and conflist named", err)
	}
	if _, err := os.Stat(in.BinDir); err == nil {
		t.Fatal("Check wrote the bin dir")
	}
	if err := in.Once(); err != nil {
		t.Fatal(err)
	}
	if err := in.Check(); err != nil {
		t.Fatalf("after Once: %v", err)
	}
	dst := filepath.Join(in.BinDir, "fstack-cni")
	breaks := []struct {
		name, want string
		do         func() error
	}{
		{"an older binary", "not this image's fstack-cni", func() error { return os.WriteFile(dst, []byte("#!/bin/true\nv0"), 0o755) }},
		{"a binary that cannot run", "not executable", func() error { return os.Chmod(dst, 0o644) }},
		{"another node config", "not the chart's", func() error { return os.WriteFile(in.NodeConfig, []byte(`{"namespaces":["other"]}`), 0o644) }},
		{"a node config fstack-cni refuses", "would refuse", func() error { return os.Chmod(etc, 0o777) }},
		{"an older conflist entry", "does not chain", func() error {
			return os.WriteFile(in.Conflist, []byte(`{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"fstack-cni","bridge":"old"}]}`), 0o644)
		}},
		{"no conflist", "not written", func() error { return os.Remove(in.Conflist) }},
	}
	for _, b := range breaks {
		if err := b.do(); err != nil {
			t.Fatal(err)
		}
		err := in.Check()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v, want %q", b.name, err, b.want)
		}
		if err := os.Chmod(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := in.Once(); err != nil {
			t.Fatal(err)
		}
		if err := in.Check(); err != nil {
			t.Fatalf("after %s, Once did not make the node right again: %v", b.name, err)
		}
	}
}

// sameContent streams both files: equal files of several blocks, and files that differ only in
// their last byte or their length.
func TestSameContentComparesWholeFiles(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("fstack-cni"), 20000) // about three 64 KiB blocks
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a", big)
	lastByte := append(bytes.Clone(big[:len(big)-1]), 'x')
	cases := map[string]struct {
		other []byte
		want  bool
	}{
		"equal":             {big, true},
		"last byte differs": {lastByte, false},
		"shorter":           {big[:len(big)-1], false},
		"longer":            {append(bytes.Clone(big), 'x'), false},
		"empty":             {nil, false},
	}
	for name, c := range cases {
		got, err := sameContent(a, write(strings.ReplaceAll(name, " ", "-"), c.other))
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, c.want)
		}
	}
}
