package telemetry

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Peer vets the process serving a telemetry socket, as the kernel recorded it when that process
// listened on the socket (SO_PEERCRED): an error refuses it before a byte of its is read. The
// socket's directory is the DPDK runtime directory, which the app containers share read-write,
// so the file at the path is whatever the last process to bind it made it.
type Peer func(cred *unix.Ucred) error

// maxAncestry bounds the walk up the parent chain: F-Stack's primary is the supervisor's child,
// or the child of the Nginx master the supervisor started.
const maxAncestry = 8

// ProcessOf accepts the process pid and its descendants (an Nginx master's workers, worker 0
// the DPDK primary), running as this process's effective uid: the pid is one this process
// started, so only a process it or its children forked can have it as an ancestor. A pid of 0
// or less, no primary running, refuses every peer.
func ProcessOf(pid int) Peer {
	return processOf(pid, "/proc")
}

func processOf(pid int, proc string) Peer {
	return func(cred *unix.Ucred) error {
		if pid <= 0 {
			return fmt.Errorf("served by pid %d, and no primary runs now: refused", cred.Pid)
		}
		if uid := uint32(os.Geteuid()); cred.Uid != uid {
			return fmt.Errorf("served by pid %d as uid %d, not as uid %d like the primary (pid %d): another process bound the socket; refused", cred.Pid, cred.Uid, uid, pid)
		}
		p := int(cred.Pid)
		for range maxAncestry {
			if p == pid {
				return nil
			}
			ppid, err := parentOf(proc, p)
			if err != nil || ppid <= 1 {
				break
			}
			p = ppid
		}
		return fmt.Errorf("served by pid %d, which is neither the primary (pid %d) nor a process it forked: another process bound the socket; refused", cred.Pid, pid)
	}
}

// parentOf reads a process's parent from /proc/<pid>/stat. The name field in parentheses may
// hold anything, parentheses and blanks included, so the fields are counted after its last ')'.
func parentOf(proc string, pid int) (int, error) {
	data, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: no parent", pid)
	}
	return strconv.Atoi(string(fields[1]))
}
