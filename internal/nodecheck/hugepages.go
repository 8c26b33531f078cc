package nodecheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

const hugePagesDir = "sys/kernel/mm/hugepages"

// hugePages checks every page size the kernel offers (hugepages-<kB>kB): pages reserved, some
// free, and the kubelet reporting them allocatable (it reads the pool at start only).
func hugePages(root *fsutil.Dir, alloc corev1.ResourceList) []Check {
	dir, err := root.OpenDir(hugePagesDir)
	if err != nil {
		return []Check{{Name: "hugepages", Status: Fail, Detail: errDetail("/"+hugePagesDir, err),
			Fix: "the kernel has no hugetlbfs support: use a kernel with CONFIG_HUGETLBFS"}}
	}
	defer dir.Close()
	names, err := dir.Names()
	if err != nil {
		return []Check{{Name: "hugepages", Status: Fail, Detail: errDetail("/"+hugePagesDir, err)}}
	}
	sort.Strings(names)
	var out []Check
	for _, n := range names {
		kb, ok := pageKB(n)
		if !ok {
			continue
		}
		out = append(out, hugePageSize(dir, n, kb, alloc))
	}
	return out
}

// pageKB parses hugepages-2048kB.
func pageKB(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "kB")
	kb, err := strconv.ParseInt(s, 10, 64)
	return kb, ok && err == nil && kb > 0
}

func hugePageSize(dir *fsutil.Dir, name string, kb int64, alloc corev1.ResourceList) Check {
	size := quantity(kb << 10)
	c := Check{Name: "hugepages-" + size, Label: fsv1.NodeLabelHugePages(fsv1.HugePageSize(size)), Status: Fail}
	total, terr := readInt(dir, name+"/nr_hugepages")
	free, ferr := readInt(dir, name+"/free_hugepages")
	if terr != nil || ferr != nil {
		c.Detail = fmt.Sprintf("cannot read /%s/%s: %v", hugePagesDir, name, firstErr(terr, ferr))
		return c
	}
	c.Detail = fmt.Sprintf("%d total, %d free", total, free)
	var allocPages int64 = -1
	if q, ok := alloc[corev1.ResourceName(corev1.ResourceHugePagesPrefix+size)]; ok {
		allocPages = q.Value() / (kb << 10)
		c.Detail += fmt.Sprintf(", %d allocatable", allocPages)
	} else if alloc != nil {
		allocPages = 0
		c.Detail += ", none allocatable"
	}
	switch {
	case total == 0:
		c.Fix = reserveFix(size, kb)
	case free == 0:
		c.Fix = fmt.Sprintf("every page is in use: reserve more (%s)", reserveFix(size, kb))
	case allocPages == 0:
		c.Fix = "the kubelet reads the hugepage pool only when it starts: restart the kubelet"
	default:
		c.Status = Pass
	}
	return c
}

func reserveFix(size string, kb int64) string {
	if kb >= 1<<20 {
		return fmt.Sprintf("reserve with hugepagesz=%s hugepages=N on the kernel command line (1G pages need a reboot), then restart the kubelet",
			strings.TrimSuffix(size, "i"))
	}
	return fmt.Sprintf("reserve with `echo N > /sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages` (or vm.nr_hugepages / hugepages=N at boot), then restart the kubelet", kb)
}

func readInt(dir *fsutil.Dir, rel string) (int64, error) {
	s, err := readTrimmed(dir, rel)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
