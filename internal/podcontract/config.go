package podcontract

import (
	"encoding/json"
	"fmt"
	"io"
)

// ConfigPath answers what the dataplane runs now as JSON (RunningConfig): the config.ini it
// rendered for the current generation, the EAL argv F-Stack builds from it for each process, and
// the shim's mode. It is on SupervisorPort beside StatusPath and reachable as that is (get on
// pods/proxy); `kubectl fstack config` reads it. Before the first render it answers 503.
const ConfigPath = "/config"

// ConfigMax bounds a /config answer: config.ini (lines of at most 2047 bytes, bounded maps) and
// at most 64 processes' EAL argv (at most 17 arguments of under 256 bytes each) fit with room.
const ConfigMax = 1 << 20

// RunningConfig is the answer of ConfigPath.
type RunningConfig struct {
	// Generation is the dataplane generation the config was rendered for.
	Generation int `json:"generation"`
	// ConfigINI is F-Stack's config.ini as the supervisor wrote it.
	ConfigINI string `json:"configINI"`
	// EAL is the EAL argv of each process, by process id, as F-Stack builds it from ConfigINI.
	EAL [][]string `json:"eal"`
	// ShimMode is the shim's build the stack runs (pipeline, kernel-event, ...), empty for a
	// program linked with libfstack, which has no shim.
	ShimMode string `json:"shimMode,omitempty"`
	// Program is spec.program's mode when the processes are a program linked with libfstack.
	Program string `json:"program,omitempty"`
}

// ReadRunningConfig decodes a /config answer, reading at most ConfigMax bytes: the answer comes
// from a pod, and anyone who may change the pod can make it answer anything.
func ReadRunningConfig(r io.Reader) (*RunningConfig, error) {
	body, err := io.ReadAll(io.LimitReader(r, ConfigMax+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ConfigPath, err)
	}
	if len(body) > ConfigMax {
		return nil, fmt.Errorf("%s answered more than %d bytes: no supervisor's answer", ConfigPath, ConfigMax)
	}
	c := &RunningConfig{}
	if err := json.Unmarshal(body, c); err != nil {
		return nil, fmt.Errorf("%s is not the supervisor's JSON: %w", ConfigPath, err)
	}
	if c.Generation < 0 || len(c.EAL) > 128 {
		return nil, fmt.Errorf("%s: generation %d, %d processes: no supervisor's answer", ConfigPath, c.Generation, len(c.EAL))
	}
	return c, nil
}
