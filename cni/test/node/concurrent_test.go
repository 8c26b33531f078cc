package node

import (
	"sync"
	"testing"
)

// Twenty pods at once: every ADD gets its port (mutate, not a rewrite of Bridge.ports, so no
// transaction loses another's port), and every DEL removes its own.
func TestConcurrentAddsThenDels(t *testing.T) {
	const pods = 20
	n := newNet(t, "1.1.0")
	all := make([]pod, pods)
	for i := range all {
		all[i] = newPod(900 + i)
	}
	parallel(t, all, func(p pod) error { _, err := n.add(p); return err })
	if got := ports(t); len(got) != pods {
		t.Fatalf("%d ports after %d concurrent ADDs", len(got), pods)
	}
	if got := podDirEntries(n.socketRoot()); len(got) != pods {
		t.Fatalf("%d pod directories after %d concurrent ADDs", len(got), pods)
	}
	if got := ipamLeases(n.ipamDir()); len(got) != pods {
		t.Fatalf("%d IPAM leases after %d concurrent ADDs", len(got), pods)
	}
	parallel(t, all, n.del)
	n.assertNothingLeft()
}

func parallel(t *testing.T, pods []pod, fn func(pod) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(pods))
	for _, p := range pods {
		wg.Go(func() {
			if err := fn(p); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
