// Package shimctx is the exchange between the dataplane supervisor and the app launcher about
// the shim's context slots (docs/fstack-rules.md §5): each F-Stack instance has 32, every process
// (or thread) using F-Stack sockets holds one, and a process killed with SIGKILL never gives its
// slot back. An app that starts when its instance has none left silently falls back to kernel
// sockets. The supervisor publishes the free slots per instance (State, in the shim dir); a
// launcher that finds too few for the app it is about to start asks for a dataplane restart
// (Request), which makes fresh zones, instead of starting the app on the kernel.
//
// The supervisor writes State and its answers to requests in the shim dir, which the app
// containers mount read-only; a launcher writes its Request in its own directory of the
// app-state volume (podcontract.AppStateVolume), which the supervisor reads as hostile input
// (fsutil's OpenRegular: no symlink, no FIFO, bounded size; validated values). A launcher reads
// the shim dir the same way.
package shimctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const (
	// StateFile (in the shim dir) is the supervisor's latest reading.
	StateFile = "contexts"
	// RequestFile (in the launcher's own directory of the app-state volume) is its request for a
	// dataplane restart.
	RequestFile = "restart-request"
	// DeclinedDir (in the shim dir) holds, per container, the supervisor's answer to a request it
	// does not honour (its own reading shows enough contexts): the request itself. An honoured
	// request is answered by the generation moving on.
	DeclinedDir  = "restart-declined"
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
	// Asked is when the launcher asked (Unix nanoseconds): a decline answers the request with
	// the same Asked, so an answer to an earlier request is not taken for this one's.
	Asked int64 `json:"asked,omitempty"`
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

// ReadState reads and validates the supervisor's state in the shim dir.
func ReadState(dir string) (*State, error) {
	var s State
	if err := readJSON(dir, StateFile, &s); err != nil {
		return nil, err
	}
	if len(s.Instances) > podcontract.MaxInstances {
		return nil, fmt.Errorf("%s: %d instances, at most %d", StateFile, len(s.Instances), podcontract.MaxInstances)
	}
	for k, in := range s.Instances {
		if in.Capacity < 0 || in.Capacity > 255 || in.Free < 0 || in.Free > in.Capacity {
			return nil, fmt.Errorf("%s: instance %d has %d free of %d", StateFile, k, in.Free, in.Capacity)
		}
	}
	return &s, nil
}

// ReadRequest reads and validates container's request; stateRoot is the whole app-state
// volume (the dataplane's mount). The request's Container is the directory's name, whatever
// the file says: an app cannot ask in a sibling's name.
func ReadRequest(stateRoot, container string) (*Request, error) {
	if err := fsutil.PlainName(container); err != nil {
		return nil, fmt.Errorf("%s: container name %w", RequestFile, err)
	}
	r, err := readRequest(stateRoot, container+"/"+RequestFile)
	if err != nil {
		return nil, err
	}
	r.Container = container
	return r, nil
}

// ReadDeclined reads the supervisor's answer to container's request from the shim dir.
func ReadDeclined(shimDir, container string) (*Request, error) {
	if err := fsutil.PlainName(container); err != nil {
		return nil, fmt.Errorf("%s: container name %w", DeclinedDir, err)
	}
	return readRequest(shimDir, DeclinedDir+"/"+container)
}

// Decline answers r in the shim dir (the launcher then checks again).
func Decline(shimDir string, r *Request) error {
	d, err := fsutil.OpenDir(shimDir)
	if err != nil {
		return err
	}
	defer d.Close()
	sub, _, err := d.MkdirOpen(DeclinedDir, 0o755)
	if err != nil {
		return err
	}
	defer sub.Close()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return sub.WriteAtomic(r.Container, append(data, '\n'), 0o644)
}

func readRequest(dir, rel string) (*Request, error) {
	var r Request
	if err := readJSON(dir, rel, &r); err != nil {
		return nil, err
	}
	if len(r.Need) == 0 || len(r.Need) > podcontract.MaxInstances {
		return nil, fmt.Errorf("%s/%s: need lists %d instances", dir, rel, len(r.Need))
	}
	for _, n := range r.Need {
		if n < 0 || n > 255 {
			return nil, fmt.Errorf("%s/%s: need %d is out of range", dir, rel, n)
		}
	}
	r.Container = printable(r.Container, 63)
	return &r, nil
}

// readJSON reads rel beneath dir as fsutil.ReadFileBeneath does (a regular file of bounded
// size, never through a symlink, a FIFO refused at once): its writer may be hostile.
func readJSON(dir, rel string, v any) error {
	data, err := fsutil.ReadFileBeneath(dir, rel, maxFileBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s/%s: %w", dir, rel, err)
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

// Remove deletes rel beneath dir (never through a symlink); a missing file is not an error.
func Remove(dir, rel string) error {
	d, err := fsutil.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if parent, name := path.Split(rel); parent != "" {
		sub, err := d.OpenDir(parent)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer sub.Close()
		return sub.Remove(name)
	}
	return d.Remove(rel)
}

// Now is the clock of ReadAt (both containers of a pod share the node's clock).
func Now() int64 { return time.Now().UnixNano() }
