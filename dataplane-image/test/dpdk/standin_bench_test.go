package dpdk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// standinScript is a container of the stand-in image, as a runtime would make it from the
// unpacked bundle: the image's rootfs as /, its own /run, /dev (a few nodes and the hugepage
// volume), /proc and /sys, the pod's volumes at the contract's paths, the image's entrypoint.
// $1 rootfs, $2 socket dir, $3 shim dir, $4 DPDK runtime dir, $5 hugetlbfs, $6 podinfo dir,
// $7 CPUs; the rest is the command.
const standinScript = `set -e
r=$1
mount -t tmpfs tmpfs "$r/run"
mkdir -p "$r/run/kube-fstack/vhost" "$r/run/kube-fstack/shim" "$r/run/dpdk"
mount --bind "$2" "$r/run/kube-fstack/vhost"
mount --bind "$3" "$r/run/kube-fstack/shim"
mount --bind "$4" "$r/run/dpdk"
mount -t tmpfs tmpfs "$r/dev"
for n in null zero random urandom; do touch "$r/dev/$n"; mount --bind "/dev/$n" "$r/dev/$n"; done
mkdir -p "$r/dev/hugepages"
mount --bind "$5" "$r/dev/hugepages"
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --bind "$6" "$r/etc/kube-fstack/podinfo"
for m in $(awk '$3=="hugetlbfs"{print $2}' /proc/mounts); do [ "$m" = "$r/dev/hugepages" ] || umount -l "$m"; done
cpus=$7; shift 7
exec taskset -c "$cpus" chroot "$r" "$@"`

// bundleArgs is the image's entrypoint and cmd from the unpacked bundle's runtime config.
func bundleArgs(b *testing.B, bundle string) []string {
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		b.Fatalf("no stand-in bundle (%v): run hack/bench-dataplane.sh, which builds and unpacks the image", err)
	}
	var cfg struct {
		Process struct{ Args []string } `json:"process"`
	}
	must(b, json.Unmarshal(data, &cfg))
	return cfg.Process.Args
}

// startStandin starts a container of the stand-in image for p and returns when it is ready,
// with the time from the container's start.
func (p *pod) startStandin(b *testing.B, bundle, cpus string) (*dataplane, time.Duration) {
	podinfo := filepath.Join(p.dir, "podinfo")
	must(b, os.MkdirAll(podinfo, 0o755))
	spec, err := os.ReadFile(p.specFile)
	must(b, err)
	must(b, os.WriteFile(filepath.Join(podinfo, podcontract.PodInfoSpec), spec, 0o644))
	d := &dataplane{addr: freeAddr(b), done: make(chan struct{}), logPath: filepath.Join(p.dir, "standin.log")}
	args := append([]string{"--mount", "--pid", "--fork", "--propagation", "private", "--", "sh", "-c", standinScript, "sh",
		filepath.Join(bundle, "rootfs"), p.socketDir, p.shimDir, p.runDir, env.huge.Dir, podinfo, cpus},
		append(bundleArgs(b, bundle), "--listen="+d.addr)...)
	d.cmd = exec.Command("unshare", args...)
	logFile, err := os.Create(d.logPath)
	must(b, err)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	begin := time.Now()
	must(b, d.cmd.Start())
	go func() { d.err = d.cmd.Wait(); logFile.Close(); close(d.done) }()
	b.Cleanup(func() {
		d.stop()
		if b.Failed() {
			b.Logf("stand-in output:\n%s", d.log())
		}
		env.huge.Clean()
	})
	for {
		select {
		case <-d.done:
			b.Fatalf("the stand-in exited before ready:\n%s", d.log())
		case <-time.After(5 * time.Millisecond):
		}
		if code, _ := d.get(podcontract.ReadyzPath); code == http.StatusOK {
			return d, time.Since(begin)
		}
		if time.Since(begin) > 2*time.Minute {
			b.Fatalf("the stand-in was not ready within 2 minutes:\n%s", d.log())
		}
	}
}

// ownReady is the supervisor's own figure: from its start to every process ready.
var ownReady = regexp.MustCompile(`(?m)^ready elapsed=(\S+)`)

// vmRSS reads a process's resident set in KiB.
func vmRSS(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// BenchmarkStandinTimeToReady measures, on the stand-in image (STANDIN_BUNDLE, unpacked by
// hack/bench-dataplane.sh), the time from container start to /readyz with 1 and 2 F-Stack
// processes (testpmd behind OVS-DPDK), and the supervisor's RSS while it runs.
func BenchmarkStandinTimeToReady(b *testing.B) {
	bundle := os.Getenv("STANDIN_BUNDLE")
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) {
			var ready, own []time.Duration
			rss := 0
			for i := 0; i < b.N; i++ {
				p := newPod(b, fmt.Sprintf("fsb%d%d", procs, i), "10.99.7.20", procs)
				d, took := p.startStandin(b, bundle, []string{"", "0", "0-1"}[procs])
				ready = append(ready, took)
				if m := ownReady.FindStringSubmatch(d.readable()); m != nil {
					if v, err := time.ParseDuration(m[1]); err == nil {
						own = append(own, v)
					}
				}
				time.Sleep(500 * time.Millisecond) // let it settle into its steady state
				rss = max(rss, vmRSS(d.pidOf(b, "fstack-supervis")))
				d.stop()
				if code := d.cmd.ProcessState.ExitCode(); code != 0 {
					b.Fatalf("stand-in SIGTERM exit %d:\n%s", code, d.log())
				}
			}
			slices.Sort(ready)
			b.ReportMetric(float64(ready[len(ready)/2].Milliseconds()), "ms-to-ready(median)")
			b.ReportMetric(float64(ready[len(ready)-1].Milliseconds()), "ms-to-ready(max)")
			b.ReportMetric(float64(rss)/1024, "MiB-supervisor-RSS(max)")
			if len(own) > 0 {
				slices.Sort(own)
				b.ReportMetric(float64(own[len(own)/2].Milliseconds()), "ms-supervisor-start-to-ready(median)")
			}
		})
	}
}
