package plugin

import (
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// queues and queueSize once went into the device info and nowhere else, so a network config's
// queues: 4 changed nothing. An ADD that still sets one is refused, naming the key and the
// StackInstance field that owns it, before it takes a lease, writes a file or talks to OVSDB.
func TestAddRefusesTheRetiredQueueKeys(t *testing.T) {
	for _, tc := range []struct {
		over map[string]any
		key  string
	}{
		{map[string]any{"queues": 4}, "queues"},
		{map[string]any{"queueSize": 1024}, "queueSize"},
		// encoding/json matched the old fields in any letter case; so does the refusal.
		{map[string]any{"Queues": 1}, "queues"},
		{map[string]any{"queues": nil, "QUEUESIZE": "x"}, "queueSize"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			f := newFakeOVSDB(t, nil)
			n := newNode(t, f.path, tc.over)
			err := n.p.Add(n.args)
			if codeOf(err) != types.ErrInvalidNetworkConfig {
				t.Fatalf("ADD with %v: got %v, want code %d", tc.over, err, types.ErrInvalidNetworkConfig)
			}
			for _, want := range []string{tc.key + " is set in the network config", "spec.ports[].device.vhostUser." + tc.key,
				"remove " + tc.key + " from the network config"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			assertTxns(t, f)
			n.assertIPAM(0, 0)
			n.assertNoFiles()
		})
	}
}

// A pod attached while the network config still set queues is torn down after the upgrade:
// only ADD refuses the retired keys, DEL accepts the config it gets.
func TestDelAcceptsAConfigWithTheRetiredKeys(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	old := newNode(t, f.path, n.shared(map[string]any{"queues": 4, "queueSize": 1024}))
	old.args.StdinData = old.stdin
	if err := old.p.Del(old.args); err != nil {
		t.Fatalf("DEL with queues in the config: %v", err)
	}
	n.assertNoFiles()
}

// The device info carries no queue layout: the StackInstance owns it, and a second value here
// would be one nobody reads.
func TestDeviceInfoCarriesNoQueueLayout(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a.devInfoInPodDir(), a.DevInfoFile} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(string(data)), "queue") {
			t.Errorf("%s carries a queue layout:\n%s", p, data)
		}
	}
}
