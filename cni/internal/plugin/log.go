package plugin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/cni/internal/jsonw"
)

// logger writes one JSON object per line: time (UTC), level, msg, then the key/value pairs of
// With and of the call, in the shape log/slog's JSON handler writes. It replaces slog, whose
// handler set-up, attribute machinery and local time zone load cost about 3% of each CNI
// call's CPU time for the two or three lines a call writes.
type logger struct {
	w     io.Writer
	attrs []byte // `,"k":"v"` pairs from With, already encoded
}

// With returns a logger that adds kv (key, value, key, value ...) to every line.
func (l *logger) With(kv ...any) *logger {
	return &logger{w: l.w, attrs: appendPairs(append([]byte(nil), l.attrs...), kv)}
}

func (l *logger) Info(msg string, kv ...any)  { l.write("INFO", msg, kv) }
func (l *logger) Warn(msg string, kv ...any)  { l.write("WARN", msg, kv) }
func (l *logger) Error(msg string, kv ...any) { l.write("ERROR", msg, kv) }

func (l *logger) write(level, msg string, kv []any) {
	b := append(make([]byte, 0, 512), `{"time":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, level...)
	b = jsonw.AppendString(append(b, `","msg":`...), msg)
	b = append(b, l.attrs...)
	b = append(appendPairs(b, kv), '}', '\n')
	_, _ = l.w.Write(b) // one write per line: O_APPEND keeps concurrent commands' lines whole
}

func appendPairs(b []byte, kv []any) []byte {
	for i := 0; i+1 < len(kv); i += 2 {
		b = jsonw.AppendString(append(b, ','), fmt.Sprint(kv[i]))
		b = append(b, ':')
		switch v := kv[i+1].(type) {
		case string:
			b = jsonw.AppendString(b, v)
		case error:
			b = jsonw.AppendString(b, v.Error())
		case int:
			b, _ = jsonw.AppendValue(b, v)
		default:
			b = jsonw.AppendString(b, fmt.Sprint(v))
		}
	}
	return b
}

// openLog appends to the configured file; stdout is never used, it carries the result.
func (p *Plugin) openLog(path string) (*logger, func()) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if f, err := openLogFile(path, p.maxLogSize()); err == nil {
			return &logger{w: f}, func() { _ = f.Close() }
		}
	}
	return &logger{w: p.Stderr}, func() {}
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
