package nodecheck

import "testing"

// The kernel's own answer for loopback, which every network namespace has: rtnetlink index 1,
// no link kind, and (like ethtool -k lo) checksum offload on.
func TestKernelLinksReadsLoopback(t *testing.T) {
	links, err := KernelLinks{}.Links()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Name == "lo" {
			if l.Index != 1 || l.Kind != "" || l.TxErr != nil || !l.TxChecksum {
				t.Errorf("lo = %+v, want index 1, no kind, tx checksum offload on", l)
			}
			return
		}
	}
	t.Fatalf("no lo among %+v", links)
}
