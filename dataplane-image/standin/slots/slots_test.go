package slots

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// holder writes slot i of b as held by pid in pid namespace ns.
func holder(b []byte, i, pid int, ns uint64) {
	b[i] = 1
	rec := b[ownerOff+i*ownerSize:]
	binary.LittleEndian.PutUint32(rec, uint32(int32(pid)))
	binary.LittleEndian.PutUint64(rec[8:], ns)
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	mustDo(t, c.Run())
	return c.Process.Pid
}

// As fstack does with patch 0007, the stand-in's reading gives back a slot whose holder is gone
// and was in the reader's pid namespace, and only that one: a live holder, a holder of another
// namespace (whose pid would name some other process here) and a slot with no recorded holder
// keep theirs. Without the reclaim every SIGKILLed app lost its slot until the dataplane restarted.
func TestSlotsOfDeadHoldersAreGivenBack(t *testing.T) {
	ns := pidNamespace()
	if ns == 0 {
		t.Fatal("cannot read /proc/self/ns/pid: the reclaim needs it")
	}
	dir := t.TempDir()
	b := make([]byte, fileSize)
	dead := deadPID(t)
	holder(b, 0, dead, ns)
	holder(b, 1, os.Getpid(), ns)
	holder(b, 2, dead, ns+1)
	holder(b, 3, 0, ns)
	path := filepath.Join(dir, SlotFile(0))
	mustDo(t, os.WriteFile(path, b, 0o644))

	src := &source{dir: dir, n: 1}
	got, err := src.Read()
	mustDo(t, err)
	if got[0].Free != maxSlots-3 || got[0].Capacity != maxSlots {
		t.Fatalf("reading %+v, want %d free of %d (the dead holder's slot given back)", got[0], maxSlots-3, maxSlots)
	}
	after, err := os.ReadFile(path)
	mustDo(t, err)
	want := make([]byte, fileSize)
	copy(want, b)
	want[0] = 0
	clear(want[ownerOff : ownerOff+ownerSize])
	if string(after) != string(want) {
		t.Fatalf("the file after the reclaim differs from slot 0 freed and its holder cleared:\n got %x\nwant %x", after[:ownerOff+4*ownerSize], want[:ownerOff+4*ownerSize])
	}

	// Within the second, a newly dead holder waits for the next look, as fstack's loop does.
	holder(after, 1, deadPID(t), ns)
	mustDo(t, os.WriteFile(path, after, 0o644))
	if got, err = src.Read(); err != nil || got[0].Free != maxSlots-3 {
		t.Fatalf("second reading within a second: %+v %v, want %d free (no reclaim yet)", got, err, maxSlots-3)
	}
	src.lastReclaim = src.lastReclaim.Add(-reclaimEvery)
	if got, err = src.Read(); err != nil || got[0].Free != maxSlots-2 {
		t.Fatalf("reading a second later: %+v %v, want %d free", got, err, maxSlots-2)
	}
}

// A slot file of another size (a pod can write the runtime dir) is refused, not misread.
func TestASlotFileOfAnotherSizeIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{maxSlots, fileSize + 1} {
		mustDo(t, os.WriteFile(filepath.Join(dir, SlotFile(0)), make([]byte, size), 0o644))
		_, err := (&source{dir: dir, n: 1}).Read()
		if err == nil || !strings.Contains(err.Error(), SlotFile(0)) {
			t.Fatalf("a %d-byte slot file: %v, want an error naming it", size, err)
		}
	}
}
