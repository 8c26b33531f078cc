package fftool

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestPickCPUAvoidsLcores(t *testing.T) {
	for _, tc := range []struct {
		allowed, lcores []int
		want            int
	}{
		{[]int{0, 1}, nil, 0},
		{[]int{4, 2, 3}, nil, 2},
		{[]int{2, 3}, []int{2}, 3},
		{[]int{2, 3}, []int{2, 3}, 2}, // exclusive: the container holds only the lcores' CPUs
		{[]int{5}, []int{5}, 5},
	} {
		var p *podcontract.Placement
		if tc.lcores != nil {
			p = &podcontract.Placement{LcoreCPUs: tc.lcores}
		}
		got, err := PickCPU(tc.allowed, p)
		if err != nil || got != tc.want {
			t.Errorf("PickCPU(%v, lcores %v) = %d, %v; want %d", tc.allowed, tc.lcores, got, err, tc.want)
		}
	}
	if _, err := PickCPU(nil, nil); err == nil {
		t.Error("PickCPU of no CPU: want an error")
	}
}

func TestEnvSetsOneCPU(t *testing.T) {
	got := Env([]string{"A=1", CPUEnv + "=7", CPUEnv + "X=2"}, 3)
	want := []string{"A=1", CPUEnv + "X=2", CPUEnv + "=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("Env = %v, want %v", got, want)
	}
}

func TestBinaryRunsOnlyToolsOfDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("netstat", 0o755)
	write("notexec", 0o644)
	if err := os.Symlink("/bin/sh", filepath.Join(dir, "shell")); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary(dir, "ff_netstat"); err != nil || got != filepath.Join(dir, "netstat") {
		t.Fatalf("Binary(ff_netstat) = %q, %v", got, err)
	}
	for name, want := range map[string]string{
		"ff_missing":    "ships no such",
		"ff_notexec":    "not an executable",
		"ff_shell":      "not an executable", // a link out of the tools' dir
		"netstat":       "not an F-Stack tool name",
		"ff_../netstat": "not an F-Stack tool name",
		"ff_":           "not an F-Stack tool name",
	} {
		if _, err := Binary(dir, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Binary(%q) = %v, want an error saying %q", name, err, want)
		}
	}
}

func TestLockIsHeldUntilReleasedAndRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	fd, err := Lock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
		t.Fatalf("the lock's descriptor must survive exec (FD_CLOEXEC clear): flags %d, %v", flags, err)
	}
	if _, err := Lock(dir, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "another F-Stack tool") {
		t.Fatalf("a second Lock while the first holds it: %v, want it refused after the wait", err)
	}
	_ = unix.Close(fd)
	fd2, err := Lock(dir, time.Second)
	if err != nil {
		t.Fatalf("Lock after the first was released: %v", err)
	}
	_ = unix.Close(fd2)

	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, LockFile), filepath.Join(linked, LockFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(linked, time.Second); err == nil || !strings.Contains(err.Error(), "link there is refused") {
		t.Fatalf("Lock through a link: %v, want it refused", err)
	}
	fifo := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifo, LockFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(fifo, time.Second); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Lock on a FIFO: %v, want it refused", err)
	}
}
