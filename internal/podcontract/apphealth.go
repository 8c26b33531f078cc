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
// processes, says so in AppBrokenDir while it stops the app; the supervisor fails every app
// probe of that container meanwhile, so liveness means that the app serves.
const (
	// AppBrokenDir (in ShimDir) holds one file per app container, named after the container,
	// for as long as its launcher finds the app unable to serve; the file holds the reason. The
	// launcher removes it when it starts the app.
	AppBrokenDir = "app-broken"
	// AppBrokenMax bounds a reason as written and as read (the volume is writable by the pod).
	AppBrokenMax = 512
)

// WriteAppBroken records, atomically, why container's app cannot serve.
func WriteAppBroken(shimDir, container, reason string) error {
	if err := fsutil.PlainName(container); err != nil {
		return fmt.Errorf("app-broken marker: container name %w", err)
	}
	d, err := fsutil.OpenDir(shimDir)
	if err != nil {
		return err
	}
	defer d.Close()
	sub, _, err := d.MkdirOpen(AppBrokenDir, 0o755)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.WriteAtomic(container, []byte(cleanReason([]byte(reason))+"\n"), 0o644)
}

// ClearAppBroken removes container's marker; none is fine.
func ClearAppBroken(shimDir, container string) error {
	if err := fsutil.PlainName(container); err != nil {
		return fmt.Errorf("app-broken marker: container name %w", err)
	}
	d, err := fsutil.OpenDir(shimDir)
	if err != nil {
		return err
	}
	defer d.Close()
	sub, err := d.OpenDir(AppBrokenDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.Remove(container); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ReadAppBroken returns the reason container's launcher gave, and whether there is a marker.
// It never follows a symlink and reads at most AppBrokenMax bytes; the reason comes back as
// printable ASCII on one line, fit for a probe's answer and a log.
func ReadAppBroken(shimDir, container string) (reason string, broken bool, err error) {
	if err := fsutil.PlainName(container); err != nil {
		return "", false, fmt.Errorf("app-broken marker: container name %w", err)
	}
	d, err := fsutil.OpenDir(shimDir)
	if err != nil {
		return "", false, err
	}
	defer d.Close()
	data, err := d.ReadFile(AppBrokenDir+"/"+container, AppBrokenMax+1)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		// Something other than a small regular file sits there: nobody but the pod put it.
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
