package podcontract

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// An app can be alive and serve nothing: under the multi-SC shim an Nginx master whose workers
// keep dying still holds its listening sockets, and F-Stack completes the handshakes of a
// tcpSocket probe for it (docs/fstack-rules.md §6). The launcher, which watches the app's
// processes, says so in AppBrokenFile while it stops the app; the supervisor fails every app
// probe of that container meanwhile, so liveness means that the app serves.
const (
	// AppBrokenFile, in the container's own directory of AppStateVolume, is there for as long as
	// its launcher finds the app unable to serve; it holds the reason. The launcher removes it
	// when it starts the app.
	AppBrokenFile = "app-broken"
	// AppBrokenMax bounds a reason as written and as read (the app container writes it).
	AppBrokenMax = 512
)

// WriteAppBroken records, atomically, why the app cannot serve, in stateDir: the launcher's own
// directory of AppStateVolume.
func WriteAppBroken(stateDir, reason string) error {
	d, err := fsutil.OpenDir(stateDir)
	if err != nil {
		return fmt.Errorf("app-broken marker: %w", err)
	}
	defer d.Close()
	return d.WriteAtomic(AppBrokenFile, []byte(cleanReason([]byte(reason))+"\n"), 0o644)
}

// ClearAppBroken removes the marker in stateDir; none is fine.
func ClearAppBroken(stateDir string) error {
	d, err := fsutil.OpenDir(stateDir)
	if err != nil {
		return fmt.Errorf("app-broken marker: %w", err)
	}
	defer d.Close()
	return d.Remove(AppBrokenFile)
}

// ReadAppBroken returns the reason container's launcher gave, and whether there is a marker;
// stateRoot is the whole AppStateVolume (the dataplane's mount). The container wrote it: it is
// read as OpenRegular allows (beneath stateRoot, no symlink, no FIFO) and at most AppBrokenMax
// bytes, and the reason comes back as printable ASCII on one line, fit for a probe's answer and
// a log.
func ReadAppBroken(stateRoot, container string) (reason string, broken bool, err error) {
	if err := fsutil.PlainName(container); err != nil {
		return "", false, fmt.Errorf("app-broken marker: container name %w", err)
	}
	data, err := fsutil.ReadFileBeneath(stateRoot, container+"/"+AppBrokenFile, AppBrokenMax+1)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		// Something other than a small regular file sits there: nobody but the app put it.
		return "", false, err
	}
	return cleanReason(data), true, nil
}

func cleanReason(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return ' '
		}
		return r
	}, strings.TrimSpace(string(b)))
	if len(s) > AppBrokenMax {
		s = s[:AppBrokenMax]
	}
	if s == "" {
		s = "(no reason given)"
	}
	return s
}
