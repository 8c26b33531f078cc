package cpuaffinity

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Own reads the same set the kernel reports in /proc/self/status, in ascending order.
func TestOwnIsTheKernelsCpusAllowedList(t *testing.T) {
	cpus, err := Own()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Own() = %v, %v", cpus, err)
	}
	if !slices.IsSorted(cpus) {
		t.Fatalf("Own() = %v, not ascending", cpus)
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if list, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			want, err := cpuset.Parse(strings.TrimSpace(list))
			if err != nil {
				t.Fatal(err)
			}
			if !want.Equals(cpuset.New(cpus...)) {
				t.Fatalf("Own() = %v, /proc/self/status says %s", cpus, want)
			}
			return
		}
	}
	t.Fatal("/proc/self/status has no Cpus_allowed_list")
}

func TestInitialLcoreEnvIsAMask(t *testing.T) {
	for cpu, mask := range map[int]string{
		0: "0x1", 5: "0x20", 63: "0x8000000000000000", 64: "0x10000000000000000",
	} {
		if got, want := InitialLcoreEnv(cpu), podcontract.EnvShimInitialLcore+"="+mask; got != want {
			t.Errorf("InitialLcoreEnv(%d) = %q, want %q", cpu, got, want)
		}
	}
}
