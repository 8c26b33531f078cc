package nodetest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const nrHugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"

// Hugepages is a private hugetlbfs mount of 2 MiB pages.
type Hugepages struct {
	Dir   string
	added int
}

// MountHugepages makes sure at least pages 2 MiB pages are free (other users of the machine
// may hold some) and mounts hugetlbfs at dir.
func MountHugepages(dir string, pages int) (*Hugepages, error) {
	free, err := meminfo("HugePages_Free")
	if err != nil {
		return nil, err
	}
	h := &Hugepages{Dir: dir}
	if free < pages {
		total, err := readInt(nrHugepages)
		if err != nil {
			return nil, err
		}
		h.added = pages - free
		if err := os.WriteFile(nrHugepages, []byte(strconv.Itoa(total+h.added)), 0o644); err != nil {
			return nil, fmt.Errorf("reserve hugepages: %w", err)
		}
		if free, _ = meminfo("HugePages_Free"); free < pages {
			return nil, fmt.Errorf("only %d free 2 MiB hugepages after asking the kernel for %d more; free memory first", free, h.added)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := syscall.Mount("nodev", dir, "hugetlbfs", 0, "pagesize=2M"); err != nil {
		return nil, fmt.Errorf("mount hugetlbfs at %s: %w", dir, err)
	}
	return h, nil
}

// Clean deletes the page files DPDK leaves behind: they hold the pages until removed.
func (h *Hugepages) Clean() {
	files, _ := filepath.Glob(filepath.Join(h.Dir, "*"))
	for _, f := range files {
		_ = os.RemoveAll(f)
	}
}

// Unmount cleans, unmounts and gives back the pages this instance asked for.
func (h *Hugepages) Unmount() {
	h.Clean()
	_ = syscall.Unmount(h.Dir, 0)
	_ = os.Remove(h.Dir)
	if h.added > 0 {
		if total, err := readInt(nrHugepages); err == nil {
			_ = os.WriteFile(nrHugepages, []byte(strconv.Itoa(max(0, total-h.added))), 0o644)
		}
	}
}

func meminfo(key string) (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && k == key {
			return strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return 0, fmt.Errorf("%s not in /proc/meminfo", key)
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
