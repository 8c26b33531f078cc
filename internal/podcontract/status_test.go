package podcontract

import (
	"strings"
	"testing"
	"time"
)

// The supervisor's /status as the contract fixes it: every field a reader shows decodes.
const exampleStatus = `{"generation": 3, "ready": false,
 "reason": "port 0 (attachment net1): link down for 3s: the vhost-user peer (OVS) went away; reconnecting",
 "restarts": {"dataplane": {"total": 2, "byReason": {"process_exit": 2},
   "last": {"reason": "process_exit", "message": "F-Stack process 0 (primary) exited: signal: killed", "time": "2025-01-02T03:04:05Z"}},
  "apps": {"nginx": {"total": 1, "byReason": {"exited": 1}, "last": {"reason": "exited", "message": "nginx exited 1", "time": "2025-01-02T03:04:06Z"}}}},
 "ports": [{"port": 0, "attachment": "net1", "linkUp": false, "downSince": "2025-01-02T03:04:02Z"}, {"port": 1, "attachment": "net2", "linkUp": true}]}`

func TestReadDataplaneStatus(t *testing.T) {
	s, err := ReadDataplaneStatus(strings.NewReader(exampleStatus))
	if err != nil {
		t.Fatal(err)
	}
	if s.Generation != 3 || s.Ready || !strings.HasPrefix(s.Reason, "port 0 (attachment net1): link down") ||
		s.Restarts.Dataplane.Total != 2 || s.Restarts.Dataplane.ByReason["process_exit"] != 2 ||
		s.Restarts.Dataplane.Last == nil || s.Restarts.Dataplane.Last.Message != "F-Stack process 0 (primary) exited: signal: killed" ||
		!s.Restarts.Dataplane.Last.Time.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		s.AppRestarts() != 1 || s.Restarts.Apps["nginx"].Last.Reason != "exited" {
		t.Errorf("decoded %+v", s)
	}
	down := s.DownPorts()
	if len(down) != 1 || down[0].Attachment != "net1" || down[0].DownSince == nil || s.Ports[1].DownSince != nil {
		t.Errorf("down ports %+v of %+v", down, s.Ports)
	}
}

// The pod writes every byte of the answer: a reader takes a bounded body and refuses what no
// supervisor writes.
func TestReadDataplaneStatusRefusesHostile(t *testing.T) {
	for name, body := range map[string]string{
		"too long":           `{"reason":"` + strings.Repeat("x", MaxStatusBytes) + `"}`,
		"long reason":        `{"reason":"` + strings.Repeat("x", maxStatusText+1) + `"}`,
		"negative total":     `{"restarts":{"dataplane":{"total":-1}}}`,
		"negative by reason": `{"restarts":{"apps":{"a":{"total":1,"byReason":{"x":-2}}}}}`,
		"not json":           `<html>`,
		"wrong type":         `{"generation":"3"}`,
		"many ports":         `{"ports":[` + strings.TrimSuffix(strings.Repeat(`{"port":0},`, maxStatusPorts+1), ",") + `]}`,
	} {
		if s, err := ReadDataplaneStatus(strings.NewReader(body)); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
}
