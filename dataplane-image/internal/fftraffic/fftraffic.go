// Package fftraffic reads F-Stack's per-process traffic counters with `ff_traffic -p <k> -s`.
// The tool is a DPDK secondary with hard-coded EAL arguments (prefix rte, lcore 0), so it only
// works where F-Stack runs with the default prefix; when the binary is absent (the stand-in image)
// there is nothing to collect.
package fftraffic

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Counters are one process's cumulative counters (mbuf segments, not frames).
type Counters struct {
	RxPackets, RxBytes, TxPackets, TxBytes, RxDropped, TxDropped uint64
}

// Parse reads the one-shot output: a line of six comma-separated integers
// (rx_packets,rx_bytes,tx_packets,tx_bytes,rx_dropped,tx_dropped). A header line, if present,
// is skipped; the last data line wins.
func Parse(out string) (Counters, error) {
	var c Counters
	found := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.Trim(strings.TrimSpace(line), ","), ",")
		if len(f) != 6 {
			continue
		}
		var v [6]uint64
		ok := true
		for i, s := range f {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				ok = false
				break
			}
			v[i] = n
		}
		if ok {
			c = Counters{v[0], v[1], v[2], v[3], v[4], v[5]}
			found = true
		}
	}
	if !found {
		return c, fmt.Errorf("ff_traffic: no counter line in %q", out)
	}
	return c, nil
}

// Reader runs ff_traffic. The tool must run serially (concurrent runs take each other's
// replies), so callers keep one Reader and call it from one goroutine.
type Reader struct {
	Binary  string
	Timeout time.Duration
}

// Read returns process proc's counters.
func (r *Reader) Read(ctx context.Context, proc int) (Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.Binary, "-p", strconv.Itoa(proc), "-s").CombinedOutput()
	if err != nil {
		return Counters{}, fmt.Errorf("%s -p %d -s: %w: %s", r.Binary, proc, err, out)
	}
	return Parse(string(out))
}
