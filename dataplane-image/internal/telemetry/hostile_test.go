package telemetry

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/test/pktserver"
)

// The telemetry socket lives in the DPDK runtime directory, a volume the app containers share
// read-write: an app can unlink the primary's socket and bind its own there. These servers play
// such an app (in the test process: the point is what the client does with their bytes).

// hostileServer greets with greeting and answers every request with reply(request).
func hostileServer(t *testing.T, greeting []byte, reply func(req string) []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), SocketName)
	pktserver.Serve(t, path, greeting, reply)
	return path
}

func greeting(maxOutput int64) []byte {
	return fmt.Appendf(nil, `{"version": "DPDK 23.11.0", "pid": %d, "max_output_len": %d}`, os.Getpid(), maxOutput)
}

// A greeting announcing 4 GiB made the next scrape allocate 4 GiB (more: a fatal out of memory).
func TestGreetingAnnouncingHugeOutputIsRefusedUnallocated(t *testing.T) {
	path := hostileServer(t, greeting(4<<30), func(string) []byte { return []byte(`{"/ethdev/list": [0]}`) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := Dial(path, time.Second, self)
	runtime.ReadMemStats(&after)
	if err == nil {
		c.Close()
		t.Fatal("a greeting announcing max_output_len 4 GiB was accepted")
	}
	if !strings.Contains(err.Error(), "max_output_len 4294967296") {
		t.Errorf("the error should name the announced length: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("dialing allocated %d bytes, want the fixed buffer only", grew)
	}
}

// A reply longer than the buffer is an error, not a truncated packet parsed as a reply.
func TestOversizedReplyIsAnError(t *testing.T) {
	huge := `{"/ethdev/list": [` + strings.Repeat("0, ", 40000) + `0]}`
	path := hostileServer(t, greeting(MaxOutputLen), func(string) []byte { return []byte(huge) })
	c, err := Dial(path, time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EthdevList(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("a %d-byte reply: err %v, want one saying it is longer than the buffer", len(huge), err)
	}
}

// A server that is not the primary is refused before its greeting is read.
func TestServerThatIsNotThePrimaryIsRefused(t *testing.T) {
	greeted := make(chan struct{}, 1)
	path := hostileServer(t, greeting(MaxOutputLen), func(string) []byte {
		greeted <- struct{}{}
		return []byte(`{"/ethdev/list": [0]}`)
	})
	// The primary is a real process of this uid the test started; the server is not it nor
	// forked by it.
	primary := exec.Command("sleep", "60")
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Process.Kill(); _ = primary.Wait() })
	for name, peer := range map[string]Peer{
		"another process":    ProcessOf(primary.Process.Pid),
		"no primary (pid 0)": ProcessOf(0),
	} {
		c, err := Dial(path, time.Second, peer)
		if err == nil {
			c.Close()
			t.Errorf("%s: a socket served by pid %d was accepted", name, os.Getpid())
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("served by pid %d", os.Getpid())) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: the error should name the serving pid and refuse it: %v", name, err)
		}
	}
	if _, err := AllEthdevStats(path, time.Second, ProcessOf(primary.Process.Pid)); err == nil {
		t.Error("AllEthdevStats read the counters of a server that is not the primary")
	}
	select {
	case <-greeted:
		t.Error("a request reached the server that is not the primary")
	default:
	}
	if _, err := Dial(path, time.Second, nil); err == nil {
		t.Error("a dial without a peer check was accepted")
	}
}

// The primary may be a child of the process the supervisor started (Nginx's worker 0 under its
// master): the test process is a child of its parent.
func TestServerForkedByThePrimaryIsAccepted(t *testing.T) {
	c, err := Dial(fakeServer(t, nil), time.Second, ProcessOf(os.Getppid()))
	if err != nil {
		t.Fatalf("a server forked by the given process was refused: %v", err)
	}
	c.Close()
}

// Another uid serving the socket is refused even with the right pid ancestry.
func TestServerOfAnotherUIDIsRefused(t *testing.T) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: fakeServer(t, nil), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := &Client{conn: c}
	err = cl.checkPeer(func(cred *unix.Ucred) error {
		cred.Uid++ // as if another uid had bound it
		return ProcessOf(os.Getpid())(cred)
	})
	if err == nil || !strings.Contains(err.Error(), "as uid") {
		t.Fatalf("another uid: %v", err)
	}
}

// The parent is read after the command name's last ')': a process can name itself ") 1 (".
func TestParentOfReadsPastAHostileName(t *testing.T) {
	proc := t.TempDir()
	write := func(pid int, stat string) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(300, "300 (evil) R 100 (x) S 7 300 300 0 -1")
	write(100, "100 (nginx) S 50 100 100 0 -1")
	write(400, "400 (x) S 100 400 400 0 -1")
	uid := uint32(os.Geteuid())
	if err := processOf(100, proc)(&unix.Ucred{Pid: 300, Uid: uid}); err == nil {
		t.Error("a process naming itself to look like a child of the primary was accepted")
	}
	if err := processOf(100, proc)(&unix.Ucred{Pid: 400, Uid: uid}); err != nil {
		t.Errorf("a real child of the primary was refused: %v", err)
	}
	if err := processOf(100, proc)(&unix.Ucred{Pid: 100, Uid: uid}); err != nil {
		t.Errorf("the primary itself was refused: %v", err)
	}
}

// /eal/memzone_list is walked one request per id: a list longer than DPDK sends, or with
// repeated ids, is refused.
func TestMemzoneListIsBounded(t *testing.T) {
	for name, list := range map[string]string{
		"too long": "[" + strings.TrimSuffix(strings.Repeat("1,", MaxArrayEntries+1), ",") + "]",
		"repeated": "[3, 3]",
		"negative": "[-1]",
	} {
		reply := `{"/eal/memzone_list": ` + list + `}`
		asked := make(chan string, 1000)
		path := hostileServer(t, greeting(MaxOutputLen), func(req string) []byte {
			asked <- req
			if req == "/eal/memzone_list" {
				return []byte(reply)
			}
			return []byte(`{"/eal/memzone_info": {"Name": "z", "Length": 1, "Address": "0x1000"}}`)
		})
		c, err := Dial(path, time.Second, self)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.FindMemzones("ff_socket_ops_zone_0")
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: err %v, want the list refused", name, err)
		}
		if n := len(asked); n != 1 {
			t.Errorf("%s: %d requests, want only the list", name, n)
		}
	}
}
