package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel under d with no symlink and no escape, by openat2 where the kernel has
// it (5.6+) and else one O_NOFOLLOW component at a time.
func (d *Dir) openBeneath(rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Mode: uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if flags&unix.O_CREAT == 0 {
		how.Mode = 0
	}
	fd, err := unix.Openat2(d.fd, rel, how)
	for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		fd, err = unix.Openat2(d.fd, rel, how)
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) && flags&unix.O_CREAT == 0 {
		return d.openWalk(rel, flags, mode)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: d.Join(rel), Err: err}
	}
	return fd, nil
}

// openTmpfile opens an unnamed file in d (O_TMPFILE), which linkTemp names once it is written.
func (d *Dir) openTmpfile(mode os.FileMode) (int, error) {
	return unix.Openat(d.fd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(mode.Perm()))
}
