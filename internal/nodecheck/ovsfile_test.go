package nodecheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

type askedOVS struct {
	dt    string
	found bool
	err   error
	facts *BridgeFacts
}

func (f askedOVS) BridgeDatapath(context.Context, string) (string, bool, error) {
	return f.dt, f.found, f.err
}
func (f askedOVS) BridgeFacts(context.Context, string) (*BridgeFacts, error) { return f.facts, nil }

// The installer's answers reach the agent's checks unchanged through the file.
func TestOVSAnswersRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "ovs.json")
	facts := &BridgeFacts{KernelPorts: []string{"fskvo", "veth1"}, UserspaceTSO: "true", DPDKInitialized: true, DPDKInit: "try",
		PMDCPUMask: "0x3", Uplinks: []Uplink{{Name: "dpdk0", Type: "dpdk", LinkState: "down", AdminState: "up", Error: "could not open network device dpdk0 (No such device)"}}}
	if err := WriteOVSAnswers(path, AskOVS(context.Background(), askedOVS{dt: "netdev", found: true, facts: facts}, "br-fstack", now)); err != nil {
		t.Fatal(err)
	}
	f := &OVSFile{Path: path, MaxAge: time.Minute, Now: func() time.Time { return now.Add(30 * time.Second) }}
	dt, found, err := f.BridgeDatapath(context.Background(), "br-fstack")
	if err != nil || dt != "netdev" || !found {
		t.Fatalf("datapath %q %v %v", dt, found, err)
	}
	got, err := f.BridgeFacts(context.Background(), "br-fstack")
	if err != nil || !reflect.DeepEqual(got, facts) {
		t.Fatalf("facts %+v %v", got, err)
	}
	if err := WriteOVSAnswers(path, AskOVS(context.Background(), askedOVS{err: errors.New("connection refused")}, "br-fstack", now)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.BridgeDatapath(context.Background(), "br-fstack"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("OVSDB's failure was not passed on: %v", err)
	}
}

// Whatever sits at the path is hostile: too old, too big, a symlink, a FIFO, another format or
// bridge, unknown fields, names and errors that are not what OVS and the installer write.
func TestOVSAnswersRefused(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	good := `{"version":2,"asked":"2026-11-26T06:00:00Z","bridge":"br-fstack","found":true,"datapath":"netdev","facts":{"KernelPorts":["veth1"],"UserspaceTSO":""}}`
	cases := map[string]struct {
		content string
		setup   func(dir, path string)
		age     time.Duration
		want    string
	}{
		"stale":        {content: good, age: 10 * time.Minute, want: "stale"},
		"future":       {content: good, age: -10 * time.Minute, want: "stale"},
		"missing":      {setup: func(string, string) {}, want: "no such file"},
		"oversized":    {content: good + strings.Repeat(" ", ovsAnswersLimit), want: "too large"},
		"version":      {content: strings.Replace(good, `"version":2`, `"version":1`, 1), want: "version 1"},
		"bridge":       {content: strings.Replace(good, `"br-fstack"`, `"br-int"`, 1), want: "about bridge"},
		"unknown":      {content: strings.Replace(good, `"found":true`, `"found":true,"x":1`, 1), want: "malformed"},
		"datapath":     {content: strings.Replace(good, `"netdev"`, `"net\u001b[2Jdev"`, 1), want: "datapath_type"},
		"port name":    {content: strings.Replace(good, `"veth1"`, `"../../x y"`, 1), want: "kernel port name"},
		"uplink name":  {content: strings.Replace(good, `"UserspaceTSO":""`, `"Uplinks":[{"Name":"a b"}]`, 1), want: "uplink name"},
		"uplink state": {content: strings.Replace(good, `"UserspaceTSO":""`, `"Uplinks":[{"Name":"eth0","LinkState":"UP!"}]`, 1), want: "want up or down"},
		"uplink error": {content: strings.Replace(good, `"UserspaceTSO":""`, `"Uplinks":[{"Name":"eth0","Error":"a\u001b[2Jb"}]`, 1), want: "control characters"},
		"uplink type":  {content: strings.Replace(good, `"UserspaceTSO":""`, `"Uplinks":[{"Name":"eth0","Type":"Dpdk;rm"}]`, 1), want: "type"},
		"pmd mask":     {content: strings.Replace(good, `"UserspaceTSO":""`, `"PMDCPUMask":"0x1\u001b"`, 1), want: "pmd-cpu-mask"},
		"dpdk-init":    {content: strings.Replace(good, `"UserspaceTSO":""`, `"DPDKInit":"true; x"`, 1), want: "dpdk-init"},
		"control char": {content: strings.Replace(good, `"found":true`, `"error":"a\u001b[31mb"`, 1), want: "control characters"},
		"symlink": {setup: func(dir, path string) {
			target := filepath.Join(dir, "real.json")
			_ = os.WriteFile(target, []byte(good), 0o644)
			_ = os.Symlink(target, path)
		}, want: "too many levels of symbolic links"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ovs.json")
			if tc.setup != nil {
				tc.setup(dir, path)
			} else if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f := &OVSFile{Path: path, MaxAge: time.Minute, Now: func() time.Time { return now.Add(tc.age) }}
			_, _, err := f.BridgeDatapath(context.Background(), "br-fstack")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "installer container") {
				t.Errorf("got %v, want an error with %q naming the installer container", err, tc.want)
			}
		})
	}
}

// Without the bridge OVS's own facts are still asked: the DPDK check does not depend on it.
func TestAskOVSWithoutTheBridge(t *testing.T) {
	a := AskOVS(context.Background(), askedOVS{found: false, facts: &BridgeFacts{DPDKInitialized: true}}, "br-fstack", time.Now())
	if a.Found || a.Facts == nil || !a.Facts.DPDKInitialized {
		t.Errorf("answers %+v, want OVS's facts without the bridge", a)
	}
}
