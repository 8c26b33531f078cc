package plugin

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
)

// confJSON is a valid network config with overrides; a nil value deletes the key.
func confJSON(t *testing.T, over map[string]any) []byte {
	t.Helper()
	c := map[string]any{"cniVersion": "1.1.0", "name": "fstack", "type": "fstack-cni"}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func codeOf(err error) uint {
	var te *types.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

func TestParseConfAppliesTheDocumentedDefaults(t *testing.T) {
	conf, err := parseConf(confJSON(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{conf.Bridge, conf.OVSDBSocket, conf.SocketRoot, conf.PodSocketDir, conf.DeviceInfoDir, conf.LogFile, conf.MTU}
	want := []any{DefaultBridge, DefaultOVSDBSocket, DefaultSocketRoot, DefaultPodSocketDir, DefaultDeviceInfoDir, DefaultLogFile, DefaultMTU}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("default #%d is %v, want %v", i, got[i], want[i])
		}
	}
}

func TestParseConfKeepsWhatIsSet(t *testing.T) {
	conf, err := parseConf(confJSON(t, map[string]any{"bridge": "br-x", "mtu": 9000,
		"mac": "02:00:00:00:00:01", "runtimeConfig": map[string]any{"mac": "02:00:00:00:00:02", "CNIDeviceInfoFile": "/d/f.json"}}))
	if err != nil {
		t.Fatal(err)
	}
	if conf.Bridge != "br-x" || conf.MTU != 9000 ||
		conf.MAC != "02:00:00:00:00:01" || conf.RuntimeConfig.MAC != "02:00:00:00:00:02" || conf.RuntimeConfig.CNIDeviceInfoFile != "/d/f.json" {
		t.Fatalf("parsed %+v", conf)
	}
}

func TestParseConfRejectsWithTheSpecCode(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		code uint
		msg  string
	}{
		{"malformed JSON", []byte(`{"cniVersion":`), types.ErrDecodingFailure, "malformed network config"},
		{"malformed prevResult", confJSON(t, map[string]any{"prevResult": "x"}), types.ErrDecodingFailure, "prevResult"},
		{"another plugin's type", confJSON(t, map[string]any{"type": "bridge"}), types.ErrInvalidNetworkConfig, `this plugin is "fstack-cni"`},
		{"relative socketRoot", confJSON(t, map[string]any{"socketRoot": "run/vhost"}), types.ErrInvalidNetworkConfig, "must be absolute"},
		{"relative podSocketDir", confJSON(t, map[string]any{"podSocketDir": "vhost"}), types.ErrInvalidNetworkConfig, "must be absolute"},
		{"mtu too small", confJSON(t, map[string]any{"mtu": 67}), types.ErrInvalidNetworkConfig, "mtu is 67"},
		{"mtu too large", confJSON(t, map[string]any{"mtu": 9703}), types.ErrInvalidNetworkConfig, "mtu is 9703"},
		{"bridge with a quote", confJSON(t, map[string]any{"bridge": `br"x`}), types.ErrInvalidNetworkConfig, "not a valid OVS bridge name"},
		{"multicast mac", confJSON(t, map[string]any{"mac": "01:00:5e:00:00:01"}), types.ErrInvalidNetworkConfig, "not a unicast"},
		{"runtime mac not a mac", confJSON(t, map[string]any{"runtimeConfig": map[string]any{"mac": "zz"}}), types.ErrInvalidNetworkConfig, "not a unicast"},
		{"8-byte mac", confJSON(t, map[string]any{"mac": "02:00:00:00:00:00:00:01"}), types.ErrInvalidNetworkConfig, "not a unicast"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConf(tc.in)
			if codeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (code %d), want code %d and %q", err, codeOf(err), tc.code, tc.msg)
			}
		})
	}
}

func TestParseCNIArgsIgnoresWhatItDoesNotKnow(t *testing.T) {
	got := parseCNIArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0;K8S_POD_UID=u-1;K8S_POD_INFRA_CONTAINER_ID=c;X=y=z;junk")
	want := podArgs{Namespace: "ns", Name: "web-0", UID: "u-1", InfraContainerID: "c"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if (parseCNIArgs("") != podArgs{}) {
		t.Fatal("empty CNI_ARGS must give no pod")
	}
}

// The pod UID becomes a directory name: nothing that escapes the socket root gets through.
func TestValidPodUID(t *testing.T) {
	for _, ok := range []string{"7d3c5b2a-0000-4000-8000-000000000001", "x"} {
		if err := validPodUID(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../x", "a\x00b", strings.Repeat("u", 65)} {
		if err := validPodUID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// ADD and CHECK decode prevResult and refuse a malformed one; DEL never reads it, so it cannot
// fail on it.
func TestOnlyADDAndCHECKDecodePrevResult(t *testing.T) {
	dir := t.TempDir()
	stdin := confJSON(t, map[string]any{"prevResult": map[string]any{"interfaces": "not a list"}})
	p := &Plugin{Timeout: time.Second, Stderr: io.Discard, NodeConfigOwner: os.Getuid(),
		NodeConfig: writeNodeConf(t, dir, &nodeconf.Conf{LogFile: filepath.Join(dir, "log"), SocketRoot: filepath.Join(dir, "vhost")})}
	for verb, want := range map[string]uint{"ADD": types.ErrDecodingFailure, "CHECK": types.ErrDecodingFailure, "DEL": 0} {
		c, err := p.start(stdin, verb)
		if codeOf(err) != want {
			t.Errorf("%s: got %v, want code %d", verb, err, want)
		}
		if c != nil {
			c.closer()
		}
	}
}

// A config over MaxStdin is refused with code 6 naming the limit, before it is decoded.
func TestConfigIsBounded(t *testing.T) {
	big := confJSON(t, map[string]any{"pad": strings.Repeat("a", MaxStdin)})
	if _, err := parseConf(big); codeOf(err) != types.ErrDecodingFailure || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("got %v, want code 6 naming the limit", err)
	}
	if _, err := parseConf(confJSON(t, map[string]any{"pad": strings.Repeat("a", 1000)})); err != nil {
		t.Fatalf("a small config: %v", err)
	}
}
