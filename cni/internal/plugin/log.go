package plugin

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// newLogger writes one JSON object per line (log/slog's JSON handler): time in UTC, level,
// msg, then the key/value pairs of With and of the call.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: utcTime}))
}

func utcTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// openLog appends to the configured file; stdout is never used, it carries the result.
func (p *Plugin) openLog(path string) (*slog.Logger, func()) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if f, err := openLogFile(path, p.maxLogSize()); err == nil {
			return newLogger(f), func() { _ = f.Close() }
		}
	}
	return newLogger(p.Stderr), func() {}
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
