package supervisor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// DefaultPrefix is DPDK's default file prefix, the only one the shim and the ff_* tools know.
const DefaultPrefix = "rte"

// Argv is the command line of F-Stack process k.
func (l *Launch) Argv(res *render.Result, configFile string, k int) ([]string, error) {
	if k < 0 || k >= len(res.EAL) {
		return nil, fmt.Errorf("process %d: the rendered config has %d processes", k, len(res.EAL))
	}
	if l.Programs != nil {
		return l.Programs.Argv(res, k)
	}
	fstackArgs := []string{"--conf", configFile, "--proc-type=" + render.ProcType(k), "--proc-id=" + strconv.Itoa(k)}
	if l.Native != "" {
		// start.sh's order: the program's own arguments, then F-Stack's, which ff_init parses.
		return append(slices.Clone(l.NativeArgv), fstackArgs...), nil
	}
	return append([]string{l.FStack}, fstackArgs...), nil
}

// FilePrefix is the DPDK file prefix of the rendered EAL argv (the last --file-prefix wins, as
// in EAL's parser); DPDK's default otherwise.
func FilePrefix(eal []string) string {
	prefix := DefaultPrefix
	for i, a := range eal {
		switch {
		case strings.HasPrefix(a, "--file-prefix="):
			prefix = strings.TrimPrefix(a, "--file-prefix=")
		case a == "--file-prefix" && i+1 < len(eal):
			prefix = eal[i+1]
		}
	}
	return prefix
}
