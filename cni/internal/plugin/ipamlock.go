package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockIPAM serialises one attachment's IPAM calls across processes. A runtime that kills a hung
// ADD kills only the plugin: its IPAM child runs on and may take its lease after the runtime's
// DEL already asked IPAM to release the attachment's, and nothing would release it again.
// Killing the child instead is no better: host-local killed between creating a lease file and
// writing its owner leaves a lease no DEL can match.
//
// So the lock is an open-file-description byte-range lock in one file under the socket root, at
// the offset the port name (a hash of the attachment) gives: one file for every attachment,
// nothing to clean up. ADD holds it while IPAM runs and the IPAM child inherits the description
// (inheritLock), so it stays held until that child ends even if fstack-cni dies; DEL takes it
// before IPAM's DEL and so runs after any orphaned IPAM ADD of the same attachment.
func lockIPAM(root, portName string) (*os.File, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create socket root: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(root, IPAMLockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open IPAM lock: %w", err)
	}
	off, err := strconv.ParseInt(portName[len(portPrefix):], 16, 64)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("IPAM lock offset of %q: %w", portName, err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &lk)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock IPAM of port %s: %w", portName, err)
	}
	return f, nil // closing it (the last descriptor of it) unlocks
}

// IPAMLockFile is the lock file lockIPAM keeps in the socket root: one per node, never removed,
// not a pod directory.
const IPAMLockFile = ".ipam.lock"

type inheritKey struct{}

// inheritLock makes delegate hand f to the IPAM plugin it runs under ctx.
func inheritLock(ctx context.Context, f *os.File) context.Context {
	return context.WithValue(ctx, inheritKey{}, f)
}

func inheritedLock(ctx context.Context) []*os.File {
	if f, ok := ctx.Value(inheritKey{}).(*os.File); ok && f != nil {
		return []*os.File{f}
	}
	return nil
}
