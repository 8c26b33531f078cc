package render_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// spec.dpdk.lcoresPerCPU (lab only): processes share the container's CPUs round robin, each
// lcore keeps an id of its own (the CPU's number for the first on a CPU, the top ids below
// RTE_MAX_LCORE for the others) and patch 0003 pins it with --lcores=<lcore>@<CPU>.
func TestLcoresSharingCPUs(t *testing.T) {
	cases := []struct {
		name       string
		processes  int32
		perCPU     int32
		cpus       []int
		lcores     []int
		onCPU      []int
		lcoresArgs []string
		env        string
	}{
		{"two on one CPU", 2, 2, []int{1}, []int{1, 127}, []int{1, 1},
			[]string{"--lcores=1@1", "--lcores=127@1"}, "1,1"},
		{"three on two CPUs", 3, 2, []int{4, 5}, []int{4, 5, 127}, []int{4, 5, 4},
			[]string{"--lcores=4@4", "--lcores=5@5", "--lcores=127@4"}, "4,5,4"},
		{"eight on one CPU", 8, 8, []int{3}, []int{3, 121, 122, 123, 124, 125, 126, 127}, []int{3, 3, 3, 3, 3, 3, 3, 3},
			nil, "3,3,3,3,3,3,3,3"},
		{"a CPU each anyway", 2, 2, []int{2, 3}, []int{2, 3}, []int{2, 3},
			[]string{"--lcores=2@2", "--lcores=3@3"}, "2,3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := base()
			vhostPort(s)
			s.Processes, s.DPDK.LcoresPerCPU = tc.processes, tc.perCPU
			f.DataplaneCPUs = tc.cpus
			f.AppCPUs = []int{0}
			res, err := render.RenderRaw(s, f)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.CPUs, tc.onCPU) {
				t.Errorf("CPUs: got %v, want %v", res.CPUs, tc.onCPU)
			}
			for k, argv := range res.EAL {
				if slicesHasPrefix(argv, "-c") {
					t.Errorf("process %d keeps -c: %q", k, argv)
				}
				if tc.lcoresArgs != nil && argv[1] != tc.lcoresArgs[k] {
					t.Errorf("process %d: argv[1] %q, want %q", k, argv[1], tc.lcoresArgs[k])
				}
			}
			want := []render.EnvVar{{Name: "KUBE_FSTACK_LCORE_CPUS", Value: tc.env}}
			if !reflect.DeepEqual(res.FStackEnv, want) {
				t.Errorf("FStackEnv: got %v, want %v", res.FStackEnv, want)
			}
			if got := maskBits(t, res.LcoreMask); !reflect.DeepEqual(got, tc.lcores) {
				t.Errorf("lcore_mask %s has lcores %v, want %v", res.LcoreMask, got, tc.lcores)
			}
		})
	}
}

// Without the option nothing changes: -c<the process's CPU>, no environment.
func TestOneLcorePerCPUKeepsUpstreamArgv(t *testing.T) {
	s, f := base()
	res, err := render.RenderRaw(s, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.EAL[0][1] != "-c4" || res.EAL[1][1] != "-c8" || res.FStackEnv != nil || !reflect.DeepEqual(res.CPUs, []int{2, 3}) {
		t.Errorf("argv %q %q, env %v, CPUs %v", res.EAL[0], res.EAL[1], res.FStackEnv, res.CPUs)
	}
}

// Before a pod exists the placeholders have the CPUs the injection asks for, so `kubectl fstack
// render` without --cpus and the webhook show the sharing.
func TestPlaceholdersHaveTheInjectedCPUCount(t *testing.T) {
	s, _ := base()
	vhostPort(s)
	s.Processes, s.DPDK.LcoresPerCPU = 5, 2
	f := render.PlaceholderFacts(render.MustPrepare(t, s))
	if !reflect.DeepEqual(f.DataplaneCPUs, []int{1, 2, 3}) || !reflect.DeepEqual(f.AppCPUs, []int{4}) {
		t.Errorf("placeholders: dataplane %v app %v, want 1-3 and 4", f.DataplaneCPUs, f.AppCPUs)
	}
	if errs := render.Validate(s); len(errs) > 0 {
		t.Errorf("Validate: %v", errs)
	}
	if got := render.DataplaneCPUCount(5, 2); got != 3 {
		t.Errorf("DataplaneCPUCount(5, 2) = %d", got)
	}
	s.DPDK.LcoresPerCPU = 9
	if errs := render.CheckSchema(s); len(errs) == 0 || errs[0].Field != "spec.dpdk.lcoresPerCPU" {
		t.Errorf("lcoresPerCPU 9: want the CRD's bound at spec.dpdk.lcoresPerCPU, got %v", errs)
	}
}

func slicesHasPrefix(argv []string, prefix string) bool {
	for _, a := range argv {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}

func maskBits(t *testing.T, hex string) []int {
	t.Helper()
	var bits []int
	for i := 0; i < len(hex); i++ {
		c := hex[len(hex)-1-i]
		v := strings.IndexByte("0123456789abcdef", c)
		if v < 0 {
			t.Fatalf("lcore_mask %q is not hex", hex)
		}
		for j := 0; j < 4; j++ {
			if v&(1<<j) != 0 {
				bits = append(bits, 4*i+j)
			}
		}
	}
	return bits
}
