// Package contexts counts the free contexts of the F-Stack shim (libff_syscall.so) per
// F-Stack instance, where they live: F-Stack's ff_socket_ops_zone_<k> memzones, found through
// DPDK telemetry and read from the primary's memory (the stand-in image counts its shim's slot
// files instead, dataplane-image/standin/slots). The supervisor publishes the readings for the
// launchers and decides the restarts they justify.
package contexts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// Where the shim's context slots are counted (--shim-contexts).
const (
	ContextsZone = "zone" // F-Stack's memzones ff_socket_ops_zone_<k>
	ContextsOff  = "off"
)

// ContextSource counts the free shim contexts of each F-Stack instance.
type ContextSource interface {
	// Reset starts a generation: its primary's pid and its number of instances.
	Reset(primaryPID, instances int) error
	Read() ([]shimctx.Instance, error)
	Name() string
}

// The zone layout of adapter/syscall/ff_socket_ops.h (F-Stack v1.25, x86-64, 64-byte cache
// lines): struct ff_socket_ops_zone { rte_spinlock_t lock; uint8_t count, mask, free, idx;
// uint8_t inuse[32]; struct ff_so_context *sc; uint8_t padding[16]; }, cache-line aligned, the
// contexts right after it (sc points there).
const (
	zoneHeaderSize = 64
	zoneOffCount   = 4
	zoneOffMask    = 5
	zoneOffFree    = 6
	zoneOffInuse   = 8
	zoneOffSC      = 40
	zoneMaxSlots   = 32
	zoneNameFormat = "ff_socket_ops_zone_%d"
)

// parseZone reads a zone header found at addr, and refuses anything that is not one: the
// layout is F-Stack's, not ours, and a version that changed it must not be misread.
func parseZone(b []byte, addr uint64) (shimctx.Instance, error) {
	if len(b) < zoneHeaderSize {
		return shimctx.Instance{}, fmt.Errorf("zone header: %d bytes, want %d", len(b), zoneHeaderSize)
	}
	count, mask, free := int(b[zoneOffCount]), int(b[zoneOffMask]), int(b[zoneOffFree])
	used := 0
	for i, u := range b[zoneOffInuse : zoneOffInuse+zoneMaxSlots] {
		if u > 1 || (u == 1 && i >= count) {
			return shimctx.Instance{}, fmt.Errorf("zone at 0x%x: inuse[%d]=%d", addr, i, u)
		}
		used += int(u)
	}
	sc := binary.LittleEndian.Uint64(b[zoneOffSC:])
	switch {
	case count == 0 || count > zoneMaxSlots || bits.OnesCount(uint(count)) != 1 || mask != count-1:
		return shimctx.Instance{}, fmt.Errorf("zone at 0x%x: count %d, mask %d are not F-Stack's (a power of two up to %d, and count-1)", addr, count, mask, zoneMaxSlots)
	case sc != addr+zoneHeaderSize:
		return shimctx.Instance{}, fmt.Errorf("zone at 0x%x: its contexts pointer is 0x%x, not right after the header: not the layout of F-Stack v1.25", addr, sc)
	case free != count-used:
		return shimctx.Instance{}, errInconsistent
	}
	return shimctx.Instance{Free: free, Capacity: count}, nil
}

// errInconsistent is a header caught between two stores of an attach or detach.
var errInconsistent = errors.New("zone header changed while it was read")

// zoneSource reads the zones from the primary's memory, without attaching as a DPDK process:
// the zones' addresses from the primary's telemetry, the bytes from /proc/<pid>/mem (the
// supervisor is the primary's parent and has its uid).
type zoneSource struct {
	socket string
	proc   string // /proc
	pid    int
	n      int
	addrs  []uint64
	// lastLookup spaces telemetry lookups out while the zones cannot be found; lookupErr is
	// why the last one failed.
	lastLookup time.Time
	lookupErr  error
}

// zoneLookupEvery spaces the lookups while F-Stack has not created its zones yet. The start
// waits for them (they come up to seconds after the port), so a long back-off would delay ready
// by as much.
const zoneLookupEvery = 100 * time.Millisecond

// NewZoneSource reads F-Stack's zones of the primary whose runtime files are runtimeDir/prefix.
func NewZoneSource(runtimeDir, prefix string) ContextSource { return newZoneSource(runtimeDir, prefix) }

func newZoneSource(runtimeDir, prefix string) *zoneSource {
	return &zoneSource{socket: telemetry.SocketPath(runtimeDir, prefix), proc: "/proc"}
}

func (z *zoneSource) Name() string { return "F-Stack zones " + fmt.Sprintf(zoneNameFormat, 0) + "..." }

func (z *zoneSource) Reset(pid, instances int) error {
	z.pid, z.n, z.addrs, z.lastLookup, z.lookupErr = pid, instances, nil, time.Time{}, nil
	return nil
}

func (z *zoneSource) lookup() error {
	// Only the primary this source reads the memory of may say where its zones are.
	c, err := telemetry.Dial(z.socket, 2*time.Second, telemetry.ProcessOf(z.pid))
	if err != nil {
		return err
	}
	defer c.Close()
	names := make([]string, z.n)
	for k := range names {
		names[k] = fmt.Sprintf(zoneNameFormat, k)
	}
	found, err := c.FindMemzones(names...)
	if err != nil {
		return err
	}
	addrs := make([]uint64, z.n)
	for k, name := range names {
		mz := found[name]
		if mz == nil {
			return fmt.Errorf("the primary has no memzone %s (is it F-Stack's adapter/syscall fstack?)", name)
		}
		addrs[k] = mz.Address
	}
	z.addrs = addrs
	return nil
}

func (z *zoneSource) Read() ([]shimctx.Instance, error) {
	if z.addrs == nil {
		if time.Since(z.lastLookup) < zoneLookupEvery {
			return nil, z.lookupErr
		}
		z.lastLookup = time.Now()
		if z.lookupErr = z.lookup(); z.lookupErr != nil {
			return nil, z.lookupErr
		}
	}
	mem, err := os.Open(filepath.Join(z.proc, strconv.Itoa(z.pid), "mem"))
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	return readZones(mem, z.addrs)
}

// readZones reads each zone header at its address; a header caught mid-update is read again.
func readZones(mem io.ReaderAt, addrs []uint64) ([]shimctx.Instance, error) {
	out := make([]shimctx.Instance, len(addrs))
	buf := make([]byte, zoneHeaderSize)
	for k, addr := range addrs {
		var err error
		for try := 0; try < 5; try++ {
			if _, err = mem.ReadAt(buf, int64(addr)); err != nil {
				return nil, fmt.Errorf("read zone %d at 0x%x: %w", k, addr, err)
			}
			if out[k], err = parseZone(buf, addr); !errors.Is(err, errInconsistent) {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("instance %d: %w", k, err)
		}
	}
	return out, nil
}
