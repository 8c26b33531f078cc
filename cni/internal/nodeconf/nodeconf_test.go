package nodeconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Parse takes only a well-formed node config: absolute clean paths, namespace names once, no
// unknown member; what it leaves out is the default.
func TestParse(t *testing.T) {
	c, err := Parse([]byte(`{"logFile":"/l/x.log","namespaces":["web","a-1"]}`))
	if err != nil || c.LogFile != "/l/x.log" || c.SocketRoot != DefaultSocketRoot || !c.Serves("web") || c.Serves("") || c.Serves("db") {
		t.Fatalf("%+v %v", c, err)
	}
	for in, want := range map[string]string{
		`{"logFile":"rel.log"}`:                              "logFile",
		`{"socketRoot":"/a/../etc"}`:                         "socketRoot",
		`{"deviceInfoDir":"/d/"}`:                            "deviceInfoDir",
		`{"namespaces":["../x"]}`:                            "namespaces[0]",
		`{"namespaces":["Web"]}`:                             "namespaces[0]",
		`{"namespaces":["a","a"]}`:                           "listed twice",
		`{"namespaces":["-a"]}`:                              "namespaces[0]",
		`{"namespaces":["` + strings.Repeat("a", 64) + `"]}`: "namespaces[0]",
		`{"logPath":"/x"}`:                                   "unknown field",
		`{} {}`:                                              "more than one",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %s", in, err, want)
		}
	}
}

// Load reports a missing file as ErrMissing and refuses one over MaxSize.
func TestLoadMissingAndLarge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cni.json")
	if _, err := Load(path, os.Getuid()); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "no", "cni.json"), os.Getuid()); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing directory: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"namespaces":[`+strings.Repeat(`"a",`, MaxSize/4)+`"b"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, os.Getuid()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a large file: %v", err)
	}
}

// The node config carries the platform's networks: each parsed as netplan parses a DataNetwork's
// plan, named once, and the default one of them; a bad one is refused with the member named, so
// the installer (which parses the chart's copy) fails rather than a node enforcing half a plan.
func TestParseNetworks(t *testing.T) {
	const net = `{"name":"fstack-data","subnets":["10.56.0.0/24"],"gateways":["10.56.0.1"],"vlans":[100],"macPrefix":"02:5a",` +
		`"grants":[{"namespaces":["web"],"ranges":["10.56.0.10-10.56.0.19"]},{"bySelector":true,"ranges":["10.56.0.64/26"]}]}`
	c, err := Parse([]byte(`{"namespaces":["web"],"networks":[` + net + `],"defaultNetwork":"fstack-data"}`))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := c.Network("fstack-data")
	if !ok || !c.EnforcesNetworks() || len(n.Grants) != 2 || len(n.MACPrefix) != 2 {
		t.Fatalf("network %+v %v", n, ok)
	}
	if _, ok := c.Network("other"); ok {
		t.Error("a network the node config does not list was found")
	}
	if back, err := Parse(must(c.Encode())); err != nil || back.DefaultNetwork != "fstack-data" || len(back.Networks) != 1 {
		t.Errorf("encoded and parsed again: %+v %v", back, err)
	}
	other := strings.Replace(net, `"fstack-data"`, `"other"`, 1)
	for in, want := range map[string]string{
		`{"networks":[` + strings.Replace(net, `"10.56.0.0/24"`, `"10.56.0.1/24"`, 1) + `]}`:    `networks[0] (fstack-data): subnets[0] "10.56.0.1/24"`,
		`{"networks":[` + strings.Replace(net, `"10.56.0.1"`, `"10.57.0.1"`, 1) + `]}`:          `networks[0] (fstack-data): gateways[0]`,
		`{"networks":[` + strings.Replace(net, `[100]`, `[4095]`, 1) + `]}`:                     `networks[0] (fstack-data): vlans[0] 4095`,
		`{"networks":[` + strings.Replace(net, `"02:5a"`, `"03:5a"`, 1) + `]}`:                  `networks[0] (fstack-data): macPrefix "03:5a"`,
		`{"networks":[` + strings.Replace(net, `"10.56.0.64/26"`, `"10.56.0.x"`, 1) + `]}`:      `networks[0] (fstack-data): grants[1].ranges[0] "10.56.0.x"`,
		`{"networks":[` + strings.Replace(net, `["web"]`, `["Web"]`, 1) + `]}`:                  `grants[0].namespaces[0] "Web"`,
		`{"networks":[` + strings.Replace(net, `"subnets":["10.56.0.0/24"],`, ``, 1) + `]}`:     `networks[0] (fstack-data): subnets: a network has at least one subnet`,
		`{"networks":[` + strings.Replace(net, `"fstack-data"`, `"Fstack"`, 1) + `]}`:           `networks[0].name "Fstack"`,
		`{"networks":[` + net + `,` + net + `]}`:                                                `networks[1].name "fstack-data" is listed twice`,
		`{"networks":[` + net + `,` + other + `],"defaultNetwork":"third"}`:                     `defaultNetwork "third" is not one of the networks listed (fstack-data, other)`,
		`{"defaultNetwork":"fstack-data"}`:                                                      `defaultNetwork "fstack-data" is not one of the networks listed (none)`,
		`{"networks":[` + strings.Replace(net, `"vlans"`, `"vlan"`, 1) + `]}`:                   `unknown field "vlan"`,
		`{"networks":[` + strings.Replace(net, `"bySelector"`, `"namespaceSelector"`, 1) + `]}`: `unknown field "namespaceSelector"`,
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant an error with %s", in, err, want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
