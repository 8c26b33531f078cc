package podcontract

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCPUMask(t *testing.T) {
	for mask, want := range map[string][]int{
		"": nil, "0x1": {0}, "0x2": {1}, "6": {1, 2}, "0X30": {4, 5}, "0x0": nil,
		"0x" + "1" + strings.Repeat("0", 20): {80},
	} {
		got, err := ParseCPUMask(mask)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUMask(%q) = %v, %v; want %v", mask, got, err, want)
		}
		if err == nil && len(want) > 0 {
			if back, _ := ParseCPUMask(FormatCPUMask(got)); !reflect.DeepEqual(back, want) {
				t.Errorf("FormatCPUMask(%v) = %s does not parse back", got, FormatCPUMask(got))
			}
		}
	}
	for mask, why := range map[string]string{
		"0x": "no hex digits", "0xg1": `'g' is not a hex digit`, "0x1;": `';' is not a hex digit`,
		strings.Repeat("f", 2049): "more than the 2048",
	} {
		if _, err := ParseCPUMask(mask); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseCPUMask(%.12q) = %v, want an error saying %q", mask, err, why)
		}
	}
	if got := FormatCPUMask([]int{0, 5}); got != "0x21" {
		t.Errorf("FormatCPUMask([0 5]) = %s, want 0x21", got)
	}
	if got := FormatCPUMask(nil); got != "0x0" {
		t.Errorf("FormatCPUMask(nil) = %s", got)
	}
}
