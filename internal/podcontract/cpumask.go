package podcontract

import (
	"errors"
	"fmt"
	"strings"
)

// ParseCPUMask returns the CPUs of an OVS CPU mask (other_config:pmd-cpu-mask), ascending: hex
// digits with an optional "0x", the last digit's lowest bit CPU 0, as long as the node has CPUs
// (it may exceed 64 bits). OVS reads an invalid digit as 0 (with a warning in its own log); this
// refuses the whole mask, since CPUs read from half a mask would pass a typo on as a fact.
// (fstack-cni's ADD has its own copy, cni/internal/plugin's parseCPUMask, from before this.)
func ParseCPUMask(mask string) ([]int, error) {
	if mask == "" {
		return nil, nil
	}
	digits := mask
	if len(digits) >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X') {
		digits = digits[2:]
	}
	if digits == "" {
		return nil, errors.New("it has no hex digits")
	}
	if len(digits) > (MaxCPU+1)/4 {
		return nil, fmt.Errorf("it has %d hex digits, more than the %d of Linux's highest CPU number (%d)", len(digits), (MaxCPU+1)/4, MaxCPU)
	}
	if i := strings.IndexFunc(digits, func(r rune) bool { return !isHex(r) }); i >= 0 {
		return nil, fmt.Errorf("%q is not a hex digit", []rune(digits[i:])[0])
	}
	var cpus []int
	for i := len(digits) - 1; i >= 0; i-- {
		nibble := hexValue(digits[i])
		for bit := range 4 {
			if nibble>>bit&1 == 1 {
				cpus = append(cpus, 4*(len(digits)-1-i)+bit)
			}
		}
	}
	return cpus, nil
}

// FormatCPUMask is the hex mask ("0x6") of cpus, as pmd-cpu-mask takes it; "0x0" for none.
func FormatCPUMask(cpus []int) string {
	top := -1
	for _, c := range cpus {
		top = max(top, c)
	}
	if top < 0 {
		return "0x0"
	}
	nibbles := make([]byte, top/4+1)
	for _, c := range cpus {
		nibbles[len(nibbles)-1-c/4] |= 1 << (c % 4)
	}
	for i, n := range nibbles {
		nibbles[i] = "0123456789abcdef"[n]
	}
	return "0x" + string(nibbles)
}

func isHex(r rune) bool { return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' }

func hexValue(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}
