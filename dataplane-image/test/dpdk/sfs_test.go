package dpdk

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The --single-file-segments question, answered with real DPDK (Debian 22.11): the primary
// runs with it (the KubeFStack flavor's EAL argv: with 2 MiB pages, vhost-user carries at most
// 8 memory regions), and an app-side secondary attaches WITHOUT it as well as WITH it, reading
// the same port counters and the same mempool. EAL secondaries take single_file_segments (and
// legacy_mem) from the primary's shared memory config, so the flag on the secondary's command
// line changes nothing: the shim needs no patch for it.
func TestSecondaryAttachesWithAndWithoutSingleFileSegments(t *testing.T) {
	p := newPod(t, "fsdp2", "10.99.7.11", 1)
	d := p.startDataplane(t, "0")
	d.waitReady(t)
	peer := addVethPeer(t, "10.99.7.201/24")
	pingThrough(t, peer, p.ip) // (a) the port passes pings with 2 MiB pages + --single-file-segments
	assertSingleFileSegments(t)

	without := secondaryView(t, p)
	with := secondaryView(t, p, "--single-file-segments")
	if without.rx < 3 || with.rx < 3 {
		t.Errorf("RX-packets seen by the secondary: without the flag %d, with it %d; want >= 3 (the pings)", without.rx, with.rx)
	}
	if without.mempool != with.mempool || !strings.Contains(without.mempool, "populated_size=8192") {
		t.Errorf("the secondary sees a different mempool without the flag:\nwithout:\n%s\nwith:\n%s", without.mempool, with.mempool)
	}
}

// assertSingleFileSegments checks the primary really ran with single-file segments: a few
// files (one per memseg list) hold all its pages, instead of one file per 2 MiB page.
func assertSingleFileSegments(t *testing.T) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(env.huge.Dir, "rtemap_*"))
	var bytes int64
	for _, f := range files {
		var st syscall.Stat_t
		if syscall.Stat(f, &st) == nil {
			bytes += st.Blocks * 512
		}
	}
	if len(files) == 0 || len(files) > 4 || bytes < 16<<20 {
		t.Errorf("primary's hugepage files: %d files, %d MiB; want 1-4 files holding >= 16 MiB (single-file segments)", len(files), bytes>>20)
	}
}

type view struct {
	rx      int
	mempool string
}

var mempoolBlock = regexp.MustCompile(`(?s)mempool <mb_pool_0>.*?ops_name: <[^>]*>`)

func secondaryView(t *testing.T, p *pod, flags ...string) view {
	t.Helper()
	var v view
	args := append(append([]string{"dpdk-proc-info"}, flags...), "--log-level=5", "--", "--stats")
	out, err := p.appSecondary("1", args...)
	if err != nil {
		t.Fatalf("dpdk-proc-info %v: %v", flags, err)
	}
	m := rxPackets.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dpdk-proc-info %v printed no RX-packets:\n%s", flags, out)
	}
	v.rx = atoi(m[1])
	args[len(args)-1] = "--show-mempool"
	out, err = p.appSecondary("1", args...)
	if err != nil {
		t.Fatalf("dpdk-proc-info %v --show-mempool: %v", flags, err)
	}
	v.mempool = mempoolBlock.FindString(out)
	if v.mempool == "" {
		t.Fatalf("dpdk-proc-info %v shows no mb_pool_0:\n%s", flags, out)
	}
	return v
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
