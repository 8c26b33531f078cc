package facts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// wait-placed returns only once the launcher is there (placed while it waits), as an
// executable regular file; a symlink or a plain file does not count.
func TestWaitPlaced(t *testing.T) {
	dir := t.TempDir()
	launcher := filepath.Join(dir, podcontract.Launcher)
	done := make(chan error, 1)
	go func() { done <- WaitPlaced(context.Background(), dir, time.Millisecond, nil) }()
	select {
	case err := <-done:
		t.Fatalf("returned before the launcher was placed: %v", err)
	case <-time.After(50 * time.Millisecond): // only a chance to return early, not a timing assertion
	}
	if err := os.WriteFile(launcher, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after placing: %v", err)
	}
}

func TestWaitPlacedRefusesWhatIsNotTheLauncher(t *testing.T) {
	for name, plant := range map[string]func(path string) error{
		"absent":         func(string) error { return nil },
		"not executable": func(p string) error { return os.WriteFile(p, []byte("x"), 0o644) },
		"a symlink": func(p string) error {
			target := filepath.Join(filepath.Dir(p), "elsewhere")
			if err := os.WriteFile(target, []byte("x"), 0o755); err != nil {
				return err
			}
			return os.Symlink(target, p)
		},
		"a directory": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := plant(filepath.Join(dir, podcontract.Launcher)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // an ended wait: the check runs once, then the error
			err := WaitPlaced(ctx, dir, time.Millisecond, func() string { return "not started: starting" })
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range []string{podcontract.Launcher, "cannot start", "the supervisor says: not started: starting"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
			if errors.Is(err, context.Canceled) {
				t.Error("the error should explain, not wrap the context's")
			}
		})
	}
}
