package contexts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// zoneImage is a synthetic ff_socket_ops_zone laid out as F-Stack v1.25's structs, in this
// process's memory, with inuse[i]=1 for the slots in used. It is a fake: F-Stack cannot run
// here, so its primary's memory is played by the test's own, read through /proc/self/mem like
// the primary's /proc/<pid>/mem.
func zoneImage(count int, used ...int) ([]byte, uint64) {
	mem := make([]byte, 2*zoneHeaderSize+count*128)
	// Cache-line align the header, as rte_memzone_reserve does.
	base := uintptr(unsafe.Pointer(&mem[0]))
	off := int((64 - base%64) % 64)
	b := mem[off : off+zoneHeaderSize]
	addr := uint64(base) + uint64(off)
	b[zoneOffCount], b[zoneOffMask], b[zoneOffFree] = byte(count), byte(count-1), byte(count-len(used))
	for _, i := range used {
		b[zoneOffInuse+i] = 1
	}
	binary.LittleEndian.PutUint64(b[zoneOffSC:], addr+zoneHeaderSize)
	return mem, addr
}

func TestReadsZonesFromProcessMemory(t *testing.T) {
	mem0, a0 := zoneImage(32, 0, 1, 5)
	mem1, a1 := zoneImage(32)
	f, err := os.Open("/proc/self/mem")
	mustDo(t, err)
	defer f.Close()
	got, err := readZones(f, []uint64{a0, a1})
	mustDo(t, err)
	if got[0] != (shimctx.Instance{Free: 29, Capacity: 32}) || got[1] != (shimctx.Instance{Free: 32, Capacity: 32}) {
		t.Fatalf("read %+v, want 29/32 and 32/32", got)
	}
	_, _ = mem0[0], mem1[0] // kept alive until read
}

// Anything that is not F-Stack's zone is refused rather than misread.
func TestRefusesForeignZoneLayouts(t *testing.T) {
	for name, mutate := range map[string]func(b []byte, addr uint64){
		"count not a power of two": func(b []byte, _ uint64) { b[zoneOffCount], b[zoneOffMask] = 24, 23 },
		"contexts elsewhere":       func(b []byte, addr uint64) { binary.LittleEndian.PutUint64(b[zoneOffSC:], addr+128) },
		"inuse not a flag":         func(b []byte, _ uint64) { b[zoneOffInuse] = 7 },
	} {
		mem, addr := zoneImage(32, 3)
		off := int(addr - uint64(uintptr(unsafe.Pointer(&mem[0]))))
		mutate(mem[off:], addr)
		if _, err := parseZone(mem[off:], addr); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	mem, addr := zoneImage(32, 3)
	off := int(addr - uint64(uintptr(unsafe.Pointer(&mem[0]))))
	mem[off+zoneOffFree] = 32 // an attach caught between its two stores
	if _, err := parseZone(mem[off:], addr); !errors.Is(err, errInconsistent) {
		t.Errorf("a half-updated header: %v, want errInconsistent", err)
	}
}

// The zone source end to end: addresses from a telemetry server answering like DPDK 23.11's
// /eal/memzone_list and /eal/memzone_info (a fake: no DPDK in this tier; the dataplane tier
// reads a real primary's memzone the same way), bytes from /proc/<pid>/mem.
func TestZoneSourceFindsZonesThroughTelemetry(t *testing.T) {
	mem0, a0 := zoneImage(32, 2, 3)
	mem1, a1 := zoneImage(16, 0)
	dir := t.TempDir()
	replies := map[string]string{
		"/eal/memzone_list":   `{"/eal/memzone_list": [0, 7, 9]}`,
		"/eal/memzone_info,0": `{"/eal/memzone_info": {"Zone": 0, "Name": "MP_ff_msg_pool", "Length": 4096, "Address": "0x100000000"}}`,
		"/eal/memzone_info,7": fmt.Sprintf(`{"/eal/memzone_info": {"Zone": 7, "Name": "ff_socket_ops_zone_1", "Length": 2112, "Address": "0x%x"}}`, a1),
		"/eal/memzone_info,9": fmt.Sprintf(`{"/eal/memzone_info": {"Zone": 9, "Name": "ff_socket_ops_zone_0", "Length": 4160, "Address": "0x%x"}}`, a0),
	}
	serveTelemetry(t, filepath.Join(dir, "rte", telemetry.SocketName), replies)
	z := newZoneSource(dir, "rte")
	mustDo(t, z.Reset(os.Getpid(), 2))
	got, err := z.Read()
	mustDo(t, err)
	if len(got) != 2 || got[0].Free != 30 || got[1] != (shimctx.Instance{Free: 15, Capacity: 16}) {
		t.Fatalf("read %+v", got)
	}
	_, _ = mem0[0], mem1[0]
}

func serveTelemetry(t *testing.T, path string, replies map[string]string) {
	t.Helper()
	mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	mustDo(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write([]byte(`{"version": "DPDK 23.11.0", "pid": 1, "max_output_len": 16384}`))
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					r, ok := replies[string(buf[:n])]
					if !ok {
						r = `{"x": null}`
					}
					_, _ = c.Write([]byte(r))
				}
			}()
		}
	}()
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
