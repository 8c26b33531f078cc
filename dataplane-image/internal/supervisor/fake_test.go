package supervisor

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
)

// The unit tier cannot run F-Stack or DPDK, so the processes are this test binary re-executed
// as a fake: it plays a DPDK primary the way the supervisor observes one (the runtime config
// file, its fcntl lock, the RTE magic written when "EAL init" is done) or a secondary (its
// mp_socket file), and dies or hangs on demand. The dataplane tier runs the real ones.
const (
	fakeNginxEnv = "SUPERVISOR_FAKE_NGINX"
	fakeEnv      = "SUPERVISOR_FAKE_PROCESS"
	fakeHugeEnv  = "SUPERVISOR_FAKE_HUGEPAGES"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeNginxEnv) == "1" {
		os.Exit(fakeNginxMaster(os.Args[1:]))
	}
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(fakeProcess(os.Args))
	}
	os.Exit(m.Run())
}

func fakeProcess(args []string) int {
	i := slices.Index(args, "--")
	if i < 0 || i+1 >= len(args) {
		fmt.Println("fake: no mode after --")
		return 2
	}
	mode := args[i+1]
	if mode == "native" {
		mode = fakeNative(args[i+2:])
	}
	rd := filepath.Join(os.Getenv("RUNTIME_DIRECTORY"), "dpdk", DefaultPrefix)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Printf("fake %s pid %d\nsecond line\n", mode, os.Getpid())
	switch mode {
	case "primary", "primary-ignores-term":
		fakePrimary(rd, readiness.RTEMagic)
		if mode == "primary-ignores-term" {
			signal.Ignore(syscall.SIGTERM)
			select {}
		}
	case "primary-never-ready":
		fakePrimary(rd, 0)
	case "primary-dies":
		return 3
	case "secondary", "secondary-dies":
		_ = os.WriteFile(filepath.Join(rd, fmt.Sprintf("mp_socket_%d_1f", os.Getpid())), nil, 0o600)
		fakeMapHugepages(os.Getenv(fakeHugeEnv))
		if mode == "secondary-dies" {
			time.Sleep(300 * time.Millisecond)
			return 7
		}
	}
	<-term
	return 0
}

// fakePrimary holds the config file's lock for the life of the process, as EAL does.
func fakePrimary(rd string, magic uint32) {
	_ = os.MkdirAll(rd, 0o755)
	f, err := os.OpenFile(filepath.Join(rd, "config"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		os.Exit(4)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		os.Exit(5)
	}
	var word [4]byte
	_, _ = f.WriteAt(word[:], 0)
	time.Sleep(50 * time.Millisecond) // readiness must wait for the magic, not the file
	binary.NativeEndian.PutUint32(word[:], magic)
	_, _ = f.WriteAt(word[:], 0)
}

// fakeMapHugepages maps the primary's page file, as an attaching secondary does.
func fakeMapHugepages(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, DefaultPrefix+"map_0"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		os.Exit(6)
	}
	_ = f.Truncate(4096)
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		os.Exit(6)
	}
}

// fakeNative plays a program linked with libfstack started as F-Stack's start.sh does: its
// own arguments, then --conf <file> --proc-type=<t> --proc-id=<k>, which ff_init parses; it
// checks the file is there and becomes the primary or a secondary by --proc-type.
func fakeNative(args []string) string {
	fmt.Printf("fake native argv: %v\n", args)
	var conf, procType string
	for j, a := range args {
		switch {
		case a == "--conf" && j+1 < len(args):
			conf = args[j+1]
		case strings.HasPrefix(a, "--proc-type="):
			procType = strings.TrimPrefix(a, "--proc-type=")
		}
	}
	if _, err := os.Stat(conf); err != nil {
		fmt.Printf("fake native: no config.ini: %v\n", err)
		os.Exit(8)
	}
	return procType
}
