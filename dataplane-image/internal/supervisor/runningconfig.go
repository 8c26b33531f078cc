package supervisor

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// setRunning keeps what this generation was rendered with for /config: the config.ini just
// written and the EAL argv F-Stack builds from it, so `kubectl fstack config` shows what runs
// rather than what the spec would render today.
func (s *Supervisor) setRunning(spec *fsv1.StackInstanceSpec, res *render.Result) {
	rc := &podcontract.RunningConfig{ConfigINI: string(res.Config), EAL: make([][]string, 0, len(res.EAL))}
	for _, argv := range res.EAL {
		rc.EAL = append(rc.EAL, slices.Clone(argv))
	}
	if p := spec.Program; p != nil {
		rc.Program = string(p.Mode)
	} else {
		rc.ShimMode = ShimMode(&spec.Shim)
	}
	s.running.Store(rc)
}

// serveConfig answers /config: the running config with the current generation, 503 before the
// first render.
func (s *Supervisor) serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	cur := s.running.Load()
	if cur == nil {
		http.Error(w, "no config rendered yet: the dataplane is starting", http.StatusServiceUnavailable)
		return
	}
	rc := *cur
	if b, err := fsutil.ReadFileBeneath(s.Cfg.Paths.ShimDir, podcontract.GenerationFile, maxGenerationBytes); err == nil {
		rc.Generation, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	body, err := json.Marshal(&rc)
	if err != nil || len(body) > podcontract.ConfigMax {
		http.Error(w, "config does not fit its bound", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}
