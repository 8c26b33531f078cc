package podcontract

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlaceLcores(t *testing.T) {
	cases := []struct {
		name       string
		cpus       []int
		need       int
		switchCPUs []int
		shared     bool
		want       []int
	}{
		// The lab's node: two CPUs in the shared pool, OVS's PMD on CPU 0. Before placement the
		// lcore took CPU 0, beside the PMD and the app's worker.
		{"shared pool, PMD on 0", []int{0, 1}, 1, []int{0}, true, []int{1}},
		{"shared pool, no PMD named", []int{0, 1, 2, 3}, 1, nil, true, []int{3}},
		{"shared pool, PMD on the highest", []int{0, 1, 2, 3}, 2, []int{3}, true, []int{1, 2}},
		{"shared pool, every free CPU taken", []int{0, 1}, 2, []int{0}, true, []int{0, 1}},
		{"shared pool, free CPUs short", []int{0, 1, 2}, 2, []int{1, 2}, true, []int{0, 2}},
		// Exclusive CPUs: as many as needed, in order, so lcore k is the k-th CPU as before.
		{"exclusive, exactly the need", []int{4, 5}, 2, nil, false, []int{4, 5}},
		{"exclusive, more than the need", []int{4, 5, 6}, 2, nil, false, []int{4, 5}},
		{"exclusive, one polled by the switch", []int{4, 5, 6}, 2, []int{4}, false, []int{5, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PlaceLcores(c.cpus, c.need, c.switchCPUs, c.shared)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("PlaceLcores(%v, %d, %v, %v) (-want +got):\n%s", c.cpus, c.need, c.switchCPUs, c.shared, diff)
			}
		})
	}
}

func TestAppCPUsKeepOffTheLcores(t *testing.T) {
	p := &Placement{LcoreCPUs: []int{1}, SwitchCPUs: []int{0}}
	cases := []struct {
		name  string
		own   []int
		want  []int
		apart bool
	}{
		{"two CPUs", []int{0, 1}, []int{0}, true},
		{"free CPUs before the switch's", []int{0, 1, 2, 3}, []int{2, 3, 0}, true},
		{"only the lcore's CPU", []int{1}, []int{1}, false},
		{"disjoint (exclusive lcores)", []int{2, 3}, []int{2, 3}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, apart := AppCPUs(c.own, p)
			if diff := cmp.Diff(c.want, got); diff != "" || apart != c.apart {
				t.Fatalf("AppCPUs(%v) = %v, %v; want %v, %v", c.own, got, apart, c.want, c.apart)
			}
		})
	}
	if got, apart := AppCPUs([]int{0, 1}, nil); !cmp.Equal(got, []int{0, 1}) || !apart {
		t.Fatalf("no placement recorded: AppCPUs = %v, %v; want the container's CPUs as they are", got, apart)
	}
}

func TestPlacementWarningsSayWhatIsShared(t *testing.T) {
	if w := PlacementWarnings([]int{1}, []int{0}, []int{0, 1}); len(w) != 0 {
		t.Fatalf("lcore apart from the PMD with a CPU left for the app: warnings %q", w)
	}
	w := PlacementWarnings([]int{0}, []int{0}, []int{0})
	if len(w) != 2 || !strings.Contains(w[0], "lcore CPU 0 is also polled by the switch") || !strings.Contains(w[1], "no CPU beside the lcores'") {
		t.Fatalf("one CPU for everything: warnings %q", w)
	}
	if w := PlacementWarnings([]int{3}, nil, nil); len(w) != 0 {
		t.Fatalf("an exclusive CPU: warnings %q", w)
	}
}

// The supervisor warns that the app's workers share the lcores' CPUs exactly when the launcher,
// given the same cpuset (cpuPolicy Shared: both containers on the pool), finds no other CPU
// for them; a program (spec.program) has no app under the shim and is never warned so.
func TestPlacementWarningsSayWhereTheLauncherPutsTheApp(t *testing.T) {
	for _, c := range []struct {
		name                string
		pool, lcores, polls []int
	}{
		{"one CPU", []int{0}, []int{0}, nil},
		{"two CPUs, one lcore", []int{0, 1}, []int{1}, nil},
		{"two CPUs, two lcores", []int{0, 1}, []int{0, 1}, nil},
		{"the CPU left is the switch's", []int{0, 1}, []int{1}, []int{0}},
		{"four CPUs, three lcores", []int{0, 1, 2, 3}, []int{1, 2, 3}, []int{3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, apart := AppCPUs(c.pool, &Placement{LcoreCPUs: c.lcores, SwitchCPUs: c.polls})
			said := slices.ContainsFunc(PlacementWarnings(c.lcores, c.polls, c.pool), func(w string) bool {
				return strings.Contains(w, "no CPU beside the lcores' for the app")
			})
			if said == apart {
				t.Errorf("the launcher keeps the app apart: %v; the supervisor warns it shares: %v", apart, said)
			}
			if w := PlacementWarnings(c.lcores, c.polls, nil); slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "for the app") }) {
				t.Errorf("no app under the shim (a program): warnings %q", w)
			}
		})
	}
}

// One line says what the lcores share, whoever prints it (the operator's Event, kubectl fstack
// status): the supervisor's warnings, printable, and an lcore on a switch CPU even where they
// omit it.
func TestSharedCPUsSaysItInOneLine(t *testing.T) {
	for _, c := range []struct {
		name string
		p    *Placement
		want string
	}{
		{"no placement", nil, ""},
		{"well placed", &Placement{LcoreCPUs: []int{1}, SwitchCPUs: []int{0}}, ""},
		{"blank warnings", &Placement{LcoreCPUs: []int{1}, Warnings: []string{"", " "}}, ""},
		{"two warnings", &Placement{LcoreCPUs: []int{1}, Warnings: []string{"a", "b"}}, "CPUs shared: a; b"},
		{"control characters", &Placement{LcoreCPUs: []int{1}, Warnings: []string{"a\x1b[2J\nb\u202e"}}, `CPUs shared: a\x1b[2J\nb\u202e`},
		{"switch CPU not in the warnings", &Placement{LcoreCPUs: []int{0, 1}, SwitchCPUs: []int{1}, Warnings: []string{"a"}},
			"CPUs shared: a; " + switchWarning([]int{1}, []int{1})},
		{"switch CPU in the warnings", &Placement{LcoreCPUs: []int{0}, SwitchCPUs: []int{0}, Warnings: PlacementWarnings([]int{0}, []int{0}, nil)},
			"CPUs shared: " + switchWarning([]int{0}, []int{0})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.SharedCPUs(); got != c.want {
				t.Errorf("SharedCPUs() = %q, want %q", got, c.want)
			}
		})
	}
	if !strings.HasPrefix(switchWarning([]int{1}, []int{1}), "lcore CPU 1 is also polled by the switch's PMD thread") {
		t.Errorf("switchWarning = %q", switchWarning([]int{1}, []int{1}))
	}
}

func TestReadPlacement(t *testing.T) {
	dir := t.TempDir()
	if p, err := ReadPlacement(dir); p != nil || err != nil {
		t.Fatalf("no file: %v, %v; want nil, nil", p, err)
	}
	want := Placement{LcoreCPUs: []int{1}, SwitchCPUs: []int{0}, Warnings: []string{"x"}}
	b, _ := json.Marshal(want)
	if err := os.WriteFile(filepath.Join(dir, PlacementFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPlacement(dir)
	if err != nil || !cmp.Equal(*got, want) {
		t.Fatalf("ReadPlacement = %+v, %v; want %+v", got, err, want)
	}
	for name, body := range map[string]string{
		"no lcore":         `{"lcoreCPUs":[]}`,
		"unsorted":         `{"lcoreCPUs":[2,1]}`,
		"negative":         `{"lcoreCPUs":[-1]}`,
		"switch too large": `{"lcoreCPUs":[1],"switchCPUs":[9000]}`,
		"not json":         `{`,
	} {
		if err := os.WriteFile(filepath.Join(dir, PlacementFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPlacement(dir); err == nil {
			t.Errorf("%s: ReadPlacement accepted %s", name, body)
		}
	}
	// Never through a symlink, even one to a valid file.
	other := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, PlacementFile))
	if err := os.Symlink(other, filepath.Join(dir, PlacementFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlacement(dir); err == nil {
		t.Fatal("ReadPlacement followed a symlink")
	}
}
