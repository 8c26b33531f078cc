package render

import "testing"

func TestEALCPU(t *testing.T) {
	for _, tc := range []struct {
		arg string
		cpu int
	}{{"-c4", 2}, {"-c1", 0}, {"--lcores=1@1", 1}, {"--lcores=127@5", 5}} {
		if cpu, ok, err := EALCPU(tc.arg); !ok || err != nil || cpu != tc.cpu {
			t.Errorf("EALCPU(%q) = %d %v %v, want CPU %d", tc.arg, cpu, ok, err, tc.cpu)
		}
	}
	for _, bad := range []string{"-c6", "-cx", "--lcores=1@x", "--lcores=1", "--lcores=a@1", "--lcores=1@-2"} {
		if _, ok, err := EALCPU(bad); !ok || err == nil {
			t.Errorf("EALCPU(%q) accepted", bad)
		}
	}
	if _, ok, _ := EALCPU("--lcore-x"); ok {
		t.Error("EALCPU took an argument that names no lcore")
	}
}
