package plugin

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// newLogger writes kube-fstack's log lines (internal/logging): time in UTC, level, msg,
// component, then the key/value pairs of With and of the call, as key=value text or, with
// logFormat json, one JSON object a line. The config's values are checked before (validate).
func newLogger(w io.Writer, o logging.Options) *slog.Logger {
	l, err := logging.New(w, logging.ComponentCNI, o)
	if err != nil {
		l, _ = logging.New(w, logging.ComponentCNI, logging.Options{})
	}
	return l
}

// openLog appends to the configured file; stdout is never used, it carries the result.
func (p *Plugin) openLog(path string, o logging.Options) (*slog.Logger, func()) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if f, err := openLogFile(path, p.maxLogSize()); err == nil {
			return newLogger(f, o), func() { _ = f.Close() }
		}
	}
	return newLogger(p.Stderr, o), func() {}
}

func (p *Plugin) maxLogSize() int64 {
	if p.MaxLogSize > 0 {
		return p.MaxLogSize
	}
	return DefaultMaxLogSize
}

// DefaultMaxLogSize is the size at which the log is rotated: the file becomes <logFile>.1
// (replacing the one before) and a new file is started, so the log takes at most twice this.
const DefaultMaxLogSize = 10 << 20

// openLogFile opens the log for appending, rotating it first when it is over max. Every call
// pays one fstat; only the call that finds it full takes a lock, and it rotates only if the
// file at path is still the full one, so concurrent commands rotate it once.
func openLogFile(path string, maxSize int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || st.Size() < maxSize {
		return f, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err == nil {
		if cur, err := os.Lstat(path); err == nil && os.SameFile(cur, st) {
			_ = os.Rename(path, path+".1")
		}
	}
	f.Close() // unlocks
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0o644)
}
