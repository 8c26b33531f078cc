package main

import (
	"strings"
	"testing"
)

// A reserved-CPU list that is not one is refused at start, naming the flag and the chart value.
func TestAgentFlagsKubeletReservedCPUs(t *testing.T) {
	a, _, err := parseAgentFlags([]string{"--node=n", "--kubelet-reserved-cpus=0-1,4"})
	if err != nil || a.Checks.KubeletReservedCPUs != "0-1,4" {
		t.Fatalf("a CPU list: %v %+v", err, a)
	}
	for _, bad := range []string{"0x3", "1-", "0-99999"} {
		_, _, err := parseAgentFlags([]string{"--node=n", "--kubelet-reserved-cpus=" + bad})
		if err == nil || !strings.Contains(err.Error(), "--kubelet-reserved-cpus (chart value cni.nodeAgent.kubeletReservedCPUs)") {
			t.Errorf("--kubelet-reserved-cpus=%s: %v, want an error naming the flag and the chart value", bad, err)
		}
	}
}
