package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// Bad input gets the spec's code and a message that names the problem, and leaves nothing.
func TestBadInputGetsCodeAndMessage(t *testing.T) {
	sysBridge := "br-sys"
	if _, err := env.ovs.Vsctl("--no-wait", "add-br", sysBridge, "--", "set", "bridge", sysBridge, "datapath_type=system"); err != nil {
		t.Fatal(err)
	}
	defer env.ovs.Vsctl("--no-wait", "del-br", sysBridge) //nolint:errcheck // cleanup
	for _, tc := range badInputs(sysBridge) {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "1.1.0")
			n.kubeletMounts(newPod(1))
			stdin, args := tc.mutate(n)
			_, err := execPlugin("ADD", stdin, args, newPod(1))
			if err == nil {
				t.Fatal("ADD succeeded")
			}
			if err.Code != tc.wantCode || !strings.Contains(err.Msg+err.Details, tc.wantMsg) {
				t.Fatalf("got code %d %q (%s), want code %d and %q", err.Code, err.Msg, err.Details, tc.wantCode, tc.wantMsg)
			}
			n.assertNothingLeft()
		})
	}
}

type badInput struct {
	name     string
	mutate   func(n *netw) ([]byte, string)
	wantCode uint
	wantMsg  string
}

// badInputs are ADDs with bad input (sysBridge is a bridge that is not netdev), and the code
// and message each gets.
func badInputs(sysBridge string) []badInput {
	return []badInput{
		{"malformed JSON", func(n *netw) ([]byte, string) { return []byte(`{"cniVersion":"1.1.0","name":`), newPod(1).cniArgs() }, types.ErrDecodingFailure, "unexpected end of JSON"},
		{"missing K8S_POD_UID", func(n *netw) ([]byte, string) { return n.stdin(), "K8S_POD_NAME=x" }, types.ErrInvalidEnvironmentVariables, "K8S_POD_UID is missing"},
		{"socket path over 107 bytes", func(n *netw) ([]byte, string) {
			n.extra = map[string]any{"socketRoot": filepath.Join(n.dir, strings.Repeat("d", 80))}
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrInvalidNetworkConfig, "a unix socket path holds at most 107"},
		{"bridge not netdev", func(n *netw) ([]byte, string) { n.bridge = sysBridge; return n.stdin(), newPod(1).cniArgs() }, types.ErrInvalidNetworkConfig, `"br-sys" has datapath_type "system"`},
		{"bridge missing", func(n *netw) ([]byte, string) { n.bridge = "br-nope"; return n.stdin(), newPod(1).cniArgs() }, types.ErrInvalidNetworkConfig, `bridge does not exist: "br-nope"`},
		{"OVS not running", func(n *netw) ([]byte, string) {
			n.ovsdb = filepath.Join(n.dir, "no-ovs", "db.sock")
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrTryAgainLater, "is ovsdb-server running?"},
		{"queues in the network config", func(n *netw) ([]byte, string) {
			n.extra = map[string]any{"queues": 4}
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrInvalidNetworkConfig, "set spec.ports[].device.vhostUser.queues in the StackInstance"},
		{"a node path in the network config", func(n *netw) ([]byte, string) {
			n.extra = map[string]any{"deviceInfoDir": filepath.Join(n.dir, "elsewhere")}
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrInvalidNetworkConfig, "remove deviceInfoDir from the network config"},
		{"a CNIDeviceInfoFile outside the device-info directory", func(n *netw) ([]byte, string) {
			n.extra = map[string]any{"runtimeConfig": map[string]any{"CNIDeviceInfoFile": filepath.Join(n.dir, "x.json")}}
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrInvalidNetworkConfig, "is not a file directly in the node's device-info directory"},
		{"a pod of a namespace the node does not serve", func(n *netw) ([]byte, string) {
			return n.stdin(), strings.Replace(newPod(1).cniArgs(), "K8S_POD_NAMESPACE=default", "K8S_POD_NAMESPACE=other", 1)
		}, types.ErrInvalidNetworkConfig, `namespace "other" is not one fstack-cni serves`},
		{"pod without the emptyDir", func(n *netw) ([]byte, string) {
			n.kubeletRemoves(newPod(1)) // a pod the injector did not prepare
			return n.stdin(), newPod(1).cniArgs()
		}, types.ErrIOFailure, "has no emptyDir volume fstack-vhost"},
	}
}

func TestStatusFollowsOVS(t *testing.T) {
	n := newNet(t, "1.1.0")
	status := func() error { return n.cni().GetStatusNetworkList(context.Background(), n.confList()) }
	if err := status(); err != nil {
		t.Fatalf("STATUS with OVS up: %v", err)
	}
	env.ovs.StopDB()
	err := status()
	if startErr := env.ovs.StartDB(); startErr != nil {
		t.Fatal(startErr)
	}
	assertCode(t, err, types.ErrPluginNotAvailable, "OVSDB unreachable")
	if err := status(); err != nil {
		t.Fatalf("STATUS after OVS came back: %v", err)
	}
	n.bridge = "br-nope"
	assertCode(t, status(), types.ErrPluginNotAvailable, "br-nope")
}

func assertCode(t *testing.T, err error, code uint, msg string) {
	t.Helper()
	var te *types.Error
	if err == nil {
		t.Fatalf("no error, want code %d", code)
	}
	if !asTypesError(err, &te) || te.Code != code || !strings.Contains(te.Msg, msg) {
		t.Fatalf("got %v, want code %d with %q", err, code, msg)
	}
}
