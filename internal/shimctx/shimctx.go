// Package shimctx is the exchange between the dataplane supervisor and the app launcher about
// the shim's context slots (docs/fstack-rules.md §5): each F-Stack instance has 32, every process
// (or thread) using F-Stack sockets holds one, and a process killed with SIGKILL never gives its
// slot back. An app that starts when its instance has none left silently falls back to kernel
// sockets. The supervisor publishes the free slots per instance (State, in the shim dir); a
// launcher that finds too few for the app it is about to start asks for a dataplane restart
// (Request), which makes fresh zones, instead of starting the app on the kernel.
//
// Both files live in a volume the app containers can write: every reader treats them as
// hostile (bounded size, validated values).
package shimctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

const (
	// StateFile (in the shim dir) is the supervisor's latest reading.
	StateFile = "contexts"
	// RequestFile (in the shim dir) is a launcher's request for a dataplane restart.
	RequestFile = "restart-request"
	// DeclinedFile (in the shim dir) answers a request the supervisor does not honour (its own
	// reading shows enough contexts); it holds the request. An honoured request is answered by
	// the generation moving on.
	DeclinedFile = "restart-declined"
	// MaxInstances bounds the instances a file may describe (F-Stack's lcore mask is 64 bits).
	MaxInstances = 64
	maxFileBytes = 16 << 10
)

// Instance is one F-Stack instance's slots.
type Instance struct {
	Free     int `json:"free"`
	Capacity int `json:"capacity"`
}

// State is one reading of every instance.
type State struct {
	Generation int `json:"generation"`
	// ReadAt is when the reading began (Unix nanoseconds): a launcher needs one that began after
	// its own start, when the processes of the app's previous run were already gone.
	ReadAt int64 `json:"readAt"`
	// Source says what was read: the F-Stack zones or the stand-in's slot files.
	Source    string     `json:"source"`
	Instances []Instance `json:"instances,omitempty"`
	// Error is set when the supervisor could not read the slots; Instances is then empty.
	Error string `json:"error,omitempty"`
}

// Request asks for a dataplane restart because an app would start short of slots.
type Request struct {
	Generation int    `json:"generation"`
	Container  string `json:"container"`
	// Need is the slots per instance the app will take.
	Need []int `json:"need"`
}

// Short lists the instances whose free slots are below need, as "instance k: F free, N needed".
func (s *State) Short(need []int) []string {
	var out []string
	for k, n := range need {
		if k < len(s.Instances) && s.Instances[k].Free < n {
			out = append(out, fmt.Sprintf("instance %d: %d free, %d needed", k, s.Instances[k].Free, n))
		}
	}
	return out
}

// Write stores v as JSON, atomically.
func Write(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(filepath.Join(dir, name), append(data, '\n'), 0o644)
}

// ReadState reads and validates the supervisor's state.
func ReadState(dir string) (*State, error) {
	var s State
	if err := readJSON(filepath.Join(dir, StateFile), &s); err != nil {
		return nil, err
	}
	if len(s.Instances) > MaxInstances {
		return nil, fmt.Errorf("%s: %d instances, at most %d", StateFile, len(s.Instances), MaxInstances)
	}
	for k, in := range s.Instances {
		if in.Capacity < 0 || in.Capacity > 255 || in.Free < 0 || in.Free > in.Capacity {
			return nil, fmt.Errorf("%s: instance %d has %d free of %d", StateFile, k, in.Free, in.Capacity)
		}
	}
	return &s, nil
}

// ReadRequest reads and validates a launcher's request (RequestFile or DeclinedFile).
func ReadRequest(dir, name string) (*Request, error) {
	var r Request
	if err := readJSON(filepath.Join(dir, name), &r); err != nil {
		return nil, err
	}
	if len(r.Need) == 0 || len(r.Need) > MaxInstances {
		return nil, fmt.Errorf("%s: need lists %d instances", RequestFile, len(r.Need))
	}
	for _, n := range r.Need {
		if n < 0 || n > 255 {
			return nil, fmt.Errorf("%s: need %d is out of range", RequestFile, n)
		}
	}
	r.Container = printable(r.Container, 63)
	return &r, nil
}

// readJSON reads a regular file of bounded size, never through a symlink (the volume is
// writable by the pod).
func readJSON(path string, v any) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return err
	}
	if len(data) > maxFileBytes {
		return fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// printable keeps a name from a pod safe to log: printable ASCII, bounded.
func printable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
	if len(s) > max {
		s = s[:max]
	}
	return s
}

// Remove deletes name in dir; a missing file is not an error.
func Remove(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Now is the clock of ReadAt (both containers of a pod share the node's clock).
func Now() int64 { return time.Now().UnixNano() }
