package fftraffic

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		out  string
		want Counters
		ok   bool
	}{
		"data only":          {"10,1500,8,1200,1,0\n", Counters{10, 1500, 8, 1200, 1, 0}, true},
		"header and data":    {"rx_packets,rx_bytes,tx_packets,tx_bytes,rx_dropped,tx_dropped\n5,500,4,400,0,2\n", Counters{5, 500, 4, 400, 0, 2}, true},
		"trailing comma":     {"1,2,3,4,5,6,\n", Counters{1, 2, 3, 4, 5, 6}, true},
		"EAL noise":          {"EAL: Detected CPU lcores: 2\n7,70,6,60,0,0\n", Counters{7, 70, 6, 60, 0, 0}, true},
		"ipc error":          {"fstack ipc message error\n", Counters{}, false},
		"too few columns":    {"1,2,3\n", Counters{}, false},
		"negative is no int": {"-1,2,3,4,5,6\n", Counters{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.out)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The real ff_traffic cannot run here (no F-Stack); a script prints what it prints.
func TestReaderRunsTheTool(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ff_traffic")
	script := "#!/bin/sh\n[ \"$1 $2 $3\" = \"-p 1 -s\" ] || exit 2\necho 9,900,8,800,0,0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Binary: bin, Timeout: 5 * time.Second}
	got, err := r.Read(context.Background(), 1)
	if err != nil || got.RxPackets != 9 || got.TxBytes != 800 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := r.Read(context.Background(), 0); err == nil {
		t.Fatal("a failing tool must be an error")
	}
}
