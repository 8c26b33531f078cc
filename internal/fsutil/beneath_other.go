//go:build !linux

package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// Elsewhere than Linux (the kubectl plugin on macOS, which only reads the pod contract's names
// and never opens a pod's files) there is no openat2 and no O_TMPFILE: the component walk and
// named temporary files, which Linux falls back to as well, do the same job.

func (d *Dir) openBeneath(rel string, flags int, mode uint32) (int, error) {
	return d.openWalk(rel, flags, mode)
}

func (d *Dir) openTmpfile(os.FileMode) (int, error) { return -1, unix.EOPNOTSUPP }
