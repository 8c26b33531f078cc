package podcontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// Restarts in place. The supervisor starts a new dataplane generation inside its container when
// an F-Stack process dies, and the launcher starts the app again inside its container when the
// generation moves or the app dies, so the kubelet's restart count (and its back-off) no longer
// shows them. Each launcher records its restarts in AppRestartsFile of its own directory of
// AppStateVolume; the supervisor reads them (as hostile input), exports them as metrics and
// answers them, with its own, on StatusPath.

// AppRestartsFile, in the container's own directory of AppStateVolume, is the launcher's record
// of its in-place restarts of the app (AppRestarts as JSON). The launcher keeps counting from it
// when its container restarts, so the count covers the pod's life.
const AppRestartsFile = "restarts"

// AppRestartsMax bounds the record as written and as read.
const AppRestartsMax = 4 << 10

// Why the launcher restarted the app: a closed set, so that metrics stay bounded whatever an
// app container writes.
const (
	// AppRestartExited: the app exited or was killed on its own.
	AppRestartExited = "exited"
	// AppRestartBroken: the app kept fewer workers than it configured (it served nothing).
	AppRestartBroken = "broken"
	// AppRestartDataplane: the dataplane started a new generation, whose primary the app's
	// secondary cannot use.
	AppRestartDataplane = "dataplane"
	// AppRestartReload: Nginx was asked to reload; under the shim it is restarted instead.
	AppRestartReload = "reload"
	// RestartOther is what the supervisor shows for a reason outside its set.
	RestartOther = "other"
)

// AppRestartReasons are the reasons a launcher may record.
var AppRestartReasons = []string{AppRestartExited, AppRestartBroken, AppRestartDataplane, AppRestartReload}

// Why the supervisor started a new generation in place: a closed set.
const (
	// DataplaneRestartProcessExit: an F-Stack process (or F-Stack's Nginx master or one of its
	// workers) died.
	DataplaneRestartProcessExit = "process_exit"
	// DataplaneRestartContexts: an app asked for fresh shim contexts.
	DataplaneRestartContexts = "contexts"
	// DataplaneRestartPortDown: a port lost its link.
	DataplaneRestartPortDown = "port_down"
	// DataplaneRestartStartFailed: a generation failed to start after an earlier one had
	// served (most often what the previous generation left behind).
	DataplaneRestartStartFailed = "start_failed"
)

// DataplaneRestartReasons are the reasons the supervisor counts.
var DataplaneRestartReasons = []string{DataplaneRestartProcessExit, DataplaneRestartContexts, DataplaneRestartPortDown, DataplaneRestartStartFailed}

// RestartEvent is one restart: why (a reason of the closed sets), what happened in words, when.
type RestartEvent struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Restarts counts the restarts of one thing (the dataplane, or one app container).
type Restarts struct {
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
	Last     *RestartEvent  `json:"last,omitempty"`
}

// Add counts one restart.
func (r *Restarts) Add(reason, message string, at time.Time) {
	if r.ByReason == nil {
		r.ByReason = map[string]int{}
	}
	message = cleanReason([]byte(message))
	r.Total++
	r.ByReason[reason]++
	r.Last = &RestartEvent{Reason: reason, Message: message, Time: at.UTC().Truncate(time.Second)}
}

// WriteAppRestarts records r, atomically, in stateDir: the launcher's own directory of
// AppStateVolume.
func WriteAppRestarts(stateDir string, r *Restarts) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if len(data) > AppRestartsMax {
		return fmt.Errorf("app restarts record: %d bytes, over %d", len(data), AppRestartsMax)
	}
	d, err := fsutil.OpenDir(stateDir)
	if err != nil {
		return fmt.Errorf("app restarts record: %w", err)
	}
	defer d.Close()
	return d.WriteAtomic(AppRestartsFile, append(data, '\n'), 0o644)
}

// ReadOwnAppRestarts is the launcher's read of its own record, to go on counting; none is an
// empty record.
func ReadOwnAppRestarts(stateDir string) (*Restarts, error) {
	data, err := fsutil.ReadFileBeneath(stateDir, AppRestartsFile, AppRestartsMax+1)
	if errors.Is(err, os.ErrNotExist) {
		return &Restarts{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseAppRestarts(data)
}

// ReadAppRestarts returns container's record, nil when there is none; stateRoot is the whole
// AppStateVolume (the dataplane's mount). The container wrote it: it is read as OpenRegular
// allows (beneath stateRoot, no symlink, no FIFO), at most AppRestartsMax bytes, and what comes
// back is clean: counts not negative, reasons of AppRestartReasons (any other counted as
// RestartOther), a message of printable ASCII bounded as an app-broken reason is.
func ReadAppRestarts(stateRoot, container string) (*Restarts, error) {
	if err := fsutil.PlainName(container); err != nil {
		return nil, fmt.Errorf("app restarts record: container name %w", err)
	}
	data, err := fsutil.ReadFileBeneath(stateRoot, container+"/"+AppRestartsFile, AppRestartsMax+1)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseAppRestarts(data)
}

func parseAppRestarts(data []byte) (*Restarts, error) {
	if len(data) > AppRestartsMax {
		return nil, fmt.Errorf("app restarts record: over %d bytes", AppRestartsMax)
	}
	var raw Restarts
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("app restarts record: %w", err)
	}
	out := &Restarts{ByReason: map[string]int{}}
	for reason, n := range raw.ByReason {
		if n <= 0 {
			continue
		}
		if !slices.Contains(AppRestartReasons, reason) {
			reason = RestartOther
		}
		out.ByReason[reason] = satAdd(out.ByReason[reason], n)
		out.Total = satAdd(out.Total, n)
	}
	if raw.Last != nil {
		reason := raw.Last.Reason
		if !slices.Contains(AppRestartReasons, reason) {
			reason = RestartOther
		}
		out.Last = &RestartEvent{Reason: reason, Message: cleanReason([]byte(raw.Last.Message)), Time: raw.Last.Time.UTC()}
	}
	return out, nil
}

// satAdd adds without wrapping: a record can claim any count.
func satAdd(a, b int) int {
	if a > int(^uint(0)>>1)-b {
		return int(^uint(0) >> 1)
	}
	return a + b
}
