package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a directory held open, under which every operation stays: names are resolved by the
// kernel relative to it, never through a symlink or "..", so a file planted by whoever else can
// write beneath it (a pod, in the CNI's socket root) cannot redirect a root process elsewhere.
type Dir struct {
	fd   int
	path string // for messages only; never resolved again
}

// OpenDir opens path, which the caller trusts (a configured root), as a Dir.
func OpenDir(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, path: path}, nil
}

// MkdirAllOpen creates the trusted path as os.MkdirAll does and opens it.
func MkdirAllOpen(path string, mode os.FileMode) (*Dir, error) {
	if err := os.MkdirAll(path, mode); err != nil {
		return nil, err
	}
	return OpenDir(path)
}

// Close releases the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Fd is the directory's descriptor, for locks.
func (d *Dir) Fd() int { return d.fd }

// Path is where the directory was opened, for messages.
func (d *Dir) Path() string { return d.path }

// Join names rel under the directory, for messages.
func (d *Dir) Join(rel string) string { return d.path + "/" + rel }

// ErrNotPlain is returned for a name that is not one plain path element.
var ErrNotPlain = errors.New("not a plain file name")

// PlainName checks that name is one path element: not empty, no "/", not "." or "..", no NUL.
func PlainName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q: %w", name, ErrNotPlain)
	}
	return nil
}

// openWalk is openBeneath for kernels without openat2 (or a seccomp filter refusing it): one
// O_NOFOLLOW component at a time, ".." refused.
func (d *Dir) openWalk(rel string, flags int, mode uint32) (int, error) {
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	cur, err := unix.Dup(d.fd)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		if p == "" || p == "." {
			continue
		}
		if p == ".." {
			unix.Close(cur)
			return -1, &os.PathError{Op: "open", Path: d.Join(rel), Err: unix.EXDEV}
		}
		fl, m := unix.O_RDONLY|unix.O_DIRECTORY, uint32(0)
		if i == len(parts)-1 {
			fl, m = flags, mode
		}
		next, err := unix.Openat(cur, p, fl|unix.O_NOFOLLOW|unix.O_CLOEXEC, m)
		unix.Close(cur)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: d.Join(rel), Err: err}
		}
		cur = next
	}
	return cur, nil
}

// OpenDir opens the directory rel beneath d.
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	fd, err := d.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: d.Join(rel)}, nil
}

// MkdirOpen creates the directory name in d (an existing one is fine) and opens it; created says
// whether this call made it. A symlink at name is refused, never followed.
func (d *Dir) MkdirOpen(name string, mode os.FileMode) (sub *Dir, created bool, err error) {
	if err := PlainName(name); err != nil {
		return nil, false, err
	}
	err = unix.Mkdirat(d.fd, name, uint32(mode.Perm()))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, false, &os.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	sub, oerr := d.OpenDir(name)
	return sub, err == nil, oerr
}

// OpenRegular opens the regular file rel beneath d for reading: never through a symlink or out
// of d, and refused unless fstat says it is a regular file. It opens with O_NONBLOCK, so a FIFO
// (or a device) planted there returns at once instead of blocking the caller until a writer
// comes, and fstat then refuses it; on a regular file O_NONBLOCK changes nothing. Every file a
// pod can write and a root process reads goes through here (or ReadFile).
func (d *Dir) OpenRegular(rel string) (*os.File, error) {
	return d.openRegular(rel, unix.O_RDONLY)
}

// OpenRegularRW opens the regular file rel beneath d for reading and writing, with OpenRegular's
// guarantees: for a root process that updates a file a pod shares with it.
func (d *Dir) OpenRegularRW(rel string) (*os.File, error) {
	return d.openRegular(rel, unix.O_RDWR)
}

func (d *Dir) openRegular(rel string, access int) (*os.File, error) {
	fd, err := d.openBeneath(rel, access|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.Join(rel))
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: d.Join(rel), Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ErrNotRegular is OpenRegular's refusal of anything but a regular file.
var ErrNotRegular = errors.New("not a regular file (its writer never makes one); remove it")

// ErrTooLarge is ReadFile's refusal of a file over its bound.
var ErrTooLarge = errors.New("too large")

func kind(m os.FileMode) string {
	switch t := m.Type(); {
	case t&os.ModeNamedPipe != 0:
		return "a FIFO"
	case t&os.ModeSocket != 0:
		return "a socket"
	case t&os.ModeDevice != 0:
		return "a device"
	case t&os.ModeDir != 0:
		return "a directory"
	default:
		return "type " + t.String()
	}
}

// ReadFile reads the regular file rel beneath d (OpenRegular), at most limit bytes: a larger
// one is refused, not cut, so a reader never acts on a part of what was written.
func (d *Dir) ReadFile(rel string, limit int64) ([]byte, error) {
	f, err := d.OpenRegular(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := &os.PathError{Op: "read", Path: d.Join(rel), Err: fmt.Errorf("%w: at most %d bytes", ErrTooLarge, limit)}
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() > limit {
		return nil, tooLarge
	}
	// The size can grow between fstat and read (the writer is not ours): the read is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: d.Join(rel), Err: err}
	}
	if int64(len(data)) > limit {
		return nil, tooLarge
	}
	return data, nil
}

// ReadFileBeneath reads rel beneath the trusted directory dir as Dir.ReadFile does: for one
// read of a file whose directory the caller does not hold open already.
func ReadFileBeneath(dir, rel string, limit int64) ([]byte, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(rel, limit)
}

// OpenRegularBeneath opens rel beneath the trusted directory dir as Dir.OpenRegular does.
func OpenRegularBeneath(dir, rel string) (*os.File, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenRegular(rel)
}

// OpenRegularRWBeneath opens rel beneath the trusted directory dir as Dir.OpenRegularRW does.
func OpenRegularRWBeneath(dir, rel string) (*os.File, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenRegularRW(rel)
}

// Lstat describes name in d without following it.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := PlainName(name); err != nil {
		return st, err
	}
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return st, &os.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return st, nil
}

// Remove unlinks the non-directory name in d (a symlink itself, never its target); a missing
// name is success.
func (d *Dir) Remove(name string) error { return d.unlink(name, 0) }

// Rmdir removes the empty directory name in d; a missing one is success.
func (d *Dir) Rmdir(name string) error { return d.unlink(name, unix.AT_REMOVEDIR) }

func (d *Dir) unlink(name string, flags int) error {
	if err := PlainName(name); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, flags)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return &os.PathError{Op: "remove", Path: d.Join(name), Err: err}
}

// Names lists the directory's entries.
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// Symlink makes name in d a symlink to target; an existing name is left alone (EEXIST).
func (d *Dir) Symlink(target, name string) error {
	if err := PlainName(name); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, d.fd, name); err != nil {
		return &os.PathError{Op: "symlink", Path: d.Join(name), Err: err}
	}
	return nil
}

// Readlink returns the target of the symlink name in d (EINVAL when name is not a symlink).
func (d *Dir) Readlink(name string) (string, error) {
	if err := PlainName(name); err != nil {
		return "", err
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(d.fd, name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: d.Join(name), Err: err}
	}
	return string(buf[:n]), nil
}
