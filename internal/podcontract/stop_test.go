package podcontract

import (
	"testing"
	"time"
)

// The grace period the injector enforces covers the app's whole escalation and the dataplane's
// stop after it, and stays within the API's default, so a pod that sets none needs no change.
func TestGracePeriodCoversBothStops(t *testing.T) {
	g := time.Duration(TerminationGracePeriodSeconds()) * time.Second
	if need := max(AppQuitGrace+AppTermGrace, AppGrace) + ProbeAgentStopGrace + DataplaneStopGrace; g <= need {
		t.Errorf("grace period %s does not cover the stops (%s)", g, need)
	}
	if g > 30*time.Second {
		t.Errorf("grace period %s is above the API's default of 30 s, which pods without one get", g)
	}
}
