package appprobe

import (
	"fmt"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Broken says why the launcher of the container probed at path reports that its app cannot
// serve, or "" when it does not; stateDir is the app-state volume. The app probes pass only
// when the original probe passes through F-Stack and the launcher has not found the app broken:
// F-Stack completes a tcpSocket probe's handshake on the listening socket of an Nginx master
// that has no worker left (docs/fstack-rules.md §6), so the probe alone would keep such a pod
// live. Checked before the agent is asked, so the answer does not wait behind other probes.
func Broken(stateDir, path string) string {
	container, _, ok := strings.Cut(strings.TrimPrefix(path, podcontract.AppProbePrefix), "/")
	if !ok {
		return ""
	}
	why, broken, err := podcontract.ReadAppBroken(stateDir, container)
	switch {
	case err != nil:
		// Only the app container writes there; a marker that is not a small regular file fails
		// the probe rather than hide what the launcher said. The error names the file.
		return fmt.Sprintf("the launcher's marker cannot be read: %v", err)
	case broken:
		return "the app's launcher reports that it cannot serve: " + why
	}
	return ""
}
