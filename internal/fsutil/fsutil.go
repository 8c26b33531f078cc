// Package fsutil holds file operations the node-side binaries share. Every write goes through
// Dir.WriteAtomic: a temp file that cannot be a planted symlink (O_TMPFILE, else a random name
// opened O_CREAT|O_EXCL|O_NOFOLLOW), fsync, rename within one open directory, fsync of the
// directory.
package fsutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WriteAtomic replaces path with data so that a reader (a runtime exec'ing a plugin, an app
// container reading a marker) sees the old file or the new one, never a part. The directory of
// path is the caller's and is trusted; nothing beneath it is.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	d, err := MkdirAllOpen(filepath.Dir(path), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteAtomic(filepath.Base(path), data, mode)
}

// TempPrefix starts the name of every temp file WriteAtomic may leave for name when killed
// between naming its temp file and the rename (with O_TMPFILE only a few system calls wide).
func TempPrefix(name string) string { return "." + name + ".tmp-" }

// IsTemp reports whether name is a temp file of WriteAtomic.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// noTmpfile makes tests take the path of file systems without O_TMPFILE.
var noTmpfile = false

// WriteAtomic replaces name in d with data, with mode exactly (not narrowed by the umask).
// Whatever is at name (a symlink included) is replaced, never written through.
func (d *Dir) WriteAtomic(name string, data []byte, mode os.FileMode) error {
	if err := PlainName(name); err != nil {
		return err
	}
	tmp, err := d.writeTemp(name, data, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", d.Join(name), err)
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		_ = d.Remove(tmp)
		return &os.PathError{Op: "rename", Path: d.Join(name), Err: err}
	}
	if err := unix.Fsync(d.fd); err != nil {
		return &os.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

// writeTemp writes data to a new file in d and returns its name.
func (d *Dir) writeTemp(name string, data []byte, mode os.FileMode) (string, error) {
	fd, err := d.openTmpfile(mode)
	if err == nil && noTmpfile {
		unix.Close(fd)
		err = unix.EOPNOTSUPP
	}
	if err == nil {
		if tmp, err := d.linkTemp(name, fd, data, mode); err == nil {
			return tmp, nil
		}
	}
	for range 8 { // no O_TMPFILE on this file system, or no /proc to link it through
		tmp := TempPrefix(name) + strconv.FormatUint(rand.Uint64(), 36)
		fd, err := unix.Openat(d.fd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, uint32(mode.Perm()))
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		err = writeSync(fd, data, mode)
		unix.Close(fd)
		if err != nil {
			_ = d.Remove(tmp)
			return "", err
		}
		return tmp, nil
	}
	return "", errors.New("no free temp file name")
}

// linkTemp gives an O_TMPFILE file a name once its data is on disk, so a writer killed while
// writing leaves nothing behind. linkat never follows a symlink at the new name: it fails.
func (d *Dir) linkTemp(name string, fd int, data []byte, mode os.FileMode) (string, error) {
	defer unix.Close(fd)
	if err := writeSync(fd, data, mode); err != nil {
		return "", err
	}
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	var err error
	for range 8 {
		tmp := TempPrefix(name) + strconv.FormatUint(rand.Uint64(), 36)
		err = unix.Linkat(unix.AT_FDCWD, self, d.fd, tmp, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			return tmp, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return "", fmt.Errorf("name the temp file: %w", err)
}

// writeSync writes data, sets the mode and syncs; the caller closes fd.
func writeSync(fd int, data []byte, mode os.FileMode) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		return err
	}
	return unix.Fsync(fd)
}
