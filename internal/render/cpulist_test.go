package render_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// ParseCPUList reads what the kernel writes (cpuset.cpus, Cpus_allowed_list, with its newline)
// and what a user passes to --cpus; FormatCPUList writes it back the kernel's way.
func TestCPUListRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"2-5,8,10-11", []int{2, 3, 4, 5, 8, 10, 11}}, {"8,3,3,1-2", []int{1, 2, 3, 8}}, {"4\n", []int{4}},
		{"0-0", []int{0}}, {"", nil}, {" \n", nil}, {"8191", []int{8191}},
	} {
		got, err := render.ParseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got := render.FormatCPUList([]int{1, 2, 3, 8, 10, 11, 13}); got != "1-3,8,10-11,13" {
		t.Errorf("FormatCPUList = %q", got)
	}
	if got := render.FormatCPUList(nil); got != "" {
		t.Errorf("FormatCPUList(nil) = %q", got)
	}
}

// A refused list names itself; a range is bounded before it is expanded, so "0-2000000000"
// is an error, not a map of two billion CPUs.
func TestParseCPUListRefuses(t *testing.T) {
	for _, in := range []string{"x", "5-3", "1,,2", "1-", "-1", "1-2-3", "0-2000000000", "8192", "2, 3"} {
		if got, err := render.ParseCPUList(in); err == nil || !strings.Contains(err.Error(), "cpu list") {
			t.Errorf("ParseCPUList(%q) = %v, %v; want an error naming the cpu list", in, got, err)
		}
	}
}
