// Package native is the stand-in image's program linked with libfstack (CI has no F-Stack):
// what F-Stack's ff_init does with a process's command line, played with DPDK's testpmd. It
// reads the F-Stack options ff_init parses (--conf/-c, --proc-type/-t, --proc-id/-p, anywhere
// on the line, as getopt_long finds them), loads config.ini with the project's independent
// reader of F-Stack's parser (internal/test/fstackini), builds the EAL argv F-Stack's
// dpdk_args_setup would build for that process (kube-fstack's patched flavor, as the stand-in
// image's label says), and runs testpmd with it: one queue pair per process, as F-Stack's
// processes poll their own queue; the primary answers pings (icmpecho), the secondaries only
// receive. It does not stand in for anything after ff_init: no stack, no sockets.
package native

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fstackini"
)

// Args are a process's F-Stack options and the program's own arguments.
type Args struct {
	Conf     string
	Primary  bool
	ProcID   int
	Own      []string
	procType string
	// LcoreCPUs is podcontract.EnvLcoreCPUs as this process sees it (LcoreCPUsSet: at all), which
	// the image's patch 0003 reads in dpdk_args_setup: the stand-in builds the same argv.
	LcoreCPUs    string
	LcoreCPUsSet bool
}

// WithLcoreCPUs fills LcoreCPUs from lookup (os.LookupEnv, or what an Nginx worker keeps).
func (a *Args) WithLcoreCPUs(lookup func(string) (string, bool)) *Args {
	a.LcoreCPUs, a.LcoreCPUsSet = lookup(podcontract.EnvLcoreCPUs)
	return a
}

// ParseArgs splits argv (without argv[0]) as ff_init's getopt_long does: --conf, --proc-type
// and --proc-id (long, with = or a separate value, or -c, -t, -p) are F-Stack's; the rest is
// the program's.
func ParseArgs(argv []string) (*Args, error) {
	a := &Args{ProcID: -1}
	for i := 0; i < len(argv); i++ {
		name, val, ok := fstackOpt(argv[i])
		if !ok {
			a.Own = append(a.Own, argv[i])
			continue
		}
		if val == "" {
			if i+1 >= len(argv) {
				return nil, fmt.Errorf("%s needs a value", argv[i])
			}
			i++
			val = argv[i]
		}
		if err := a.set(name, val); err != nil {
			return nil, err
		}
	}
	switch {
	case a.Conf == "":
		return nil, errors.New("no --conf: F-Stack's start.sh passes --conf <config.ini>")
	case a.procType == "":
		a.Primary = true // ff_init's default
	}
	if a.ProcID < 0 {
		a.ProcID = 0
	}
	return a, nil
}

func fstackOpt(arg string) (name, val string, ok bool) {
	for _, o := range []struct{ long, short string }{{"--conf", "-c"}, {"--proc-type", "-t"}, {"--proc-id", "-p"}} {
		switch {
		case arg == o.long || arg == o.short:
			return o.long, "", true
		case strings.HasPrefix(arg, o.long+"="):
			return o.long, strings.TrimPrefix(arg, o.long+"="), true
		case strings.HasPrefix(arg, o.short) && len(arg) > 2:
			return o.long, arg[2:], true
		}
	}
	return "", "", false
}

func (a *Args) set(name, val string) error {
	switch name {
	case "--conf":
		a.Conf = val
	case "--proc-type":
		if val != "primary" && val != "secondary" && val != "auto" {
			return fmt.Errorf("invalid proc-type:%s", val)
		}
		a.procType, a.Primary = val, val != "secondary"
	case "--proc-id":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("invalid proc-id:%s", val)
		}
		a.ProcID = n
	}
	return nil
}

// Testpmd is the command line that plays process a.ProcID of the stack config.ini describes.
func Testpmd(testpmd string, a *Args) ([]string, error) {
	data, err := os.ReadFile(a.Conf)
	if err != nil {
		return nil, fmt.Errorf("read config.ini: %w", err)
	}
	cfg, err := fstackini.Parse(data, fstackini.V125)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Conf, err)
	}
	n := len(cfg.Lcores)
	if a.ProcID >= n {
		return nil, fmt.Errorf("proc-id %d: %s's lcore_mask has %d processes", a.ProcID, a.Conf, n)
	}
	if (a.ProcID == 0) != a.Primary {
		return nil, fmt.Errorf("proc-id %d with proc-type %s: process 0 is the primary, every other a secondary", a.ProcID, map[bool]string{true: "primary", false: "secondary"}[a.Primary])
	}
	eal := cfg.EALWithEnv(a.ProcID, true, a.LcoreCPUs, a.LcoreCPUsSet)
	argv := []string{testpmd}
	for _, e := range eal[1:] {
		var cpu int
		switch {
		case strings.HasPrefix(e, "-c"):
			if cpu, err = oneCPU(strings.TrimPrefix(e, "-c")); err != nil {
				return nil, err
			}
		case strings.HasPrefix(e, "--lcores="):
			// Patch 0003's form, --lcores=<lcore>@<CPU>: the CPU is what matters here.
			_, c, ok := strings.Cut(strings.TrimPrefix(e, "--lcores="), "@")
			if cpu, err = strconv.Atoi(c); !ok || err != nil {
				return nil, fmt.Errorf("EAL %s is not --lcores=<lcore>@<CPU>", e)
			}
		default:
			argv = append(argv, e)
			continue
		}
		// testpmd needs a forwarding lcore besides its main one: both on the process's CPU.
		argv = append(argv, fmt.Sprintf("--lcores=0@%d,1@%d", cpu, cpu))
	}
	// --no-lsc-interrupt: F-Stack enables no link-status interrupt, and with one testpmd would
	// reconnect to a restarted OVS by itself, where F-Stack needs the supervisor's link watch.
	argv = append(argv, "--", "--rxq="+strconv.Itoa(n), "--txq="+strconv.Itoa(n), "--num-procs="+strconv.Itoa(n),
		"--proc-id="+strconv.Itoa(a.ProcID), "--auto-start", "--no-lsc-interrupt")
	if a.Primary {
		return append(argv, "--total-num-mbufs=8192", "--forward-mode=icmpecho"), nil
	}
	return append(argv, "--forward-mode=rxonly"), nil
}

func oneCPU(hexMask string) (int, error) {
	m, err := strconv.ParseUint(hexMask, 16, 64)
	if err != nil || bits.OnesCount64(m) != 1 {
		return 0, fmt.Errorf("EAL -c%s is not a one-CPU mask", hexMask)
	}
	return bits.TrailingZeros64(m), nil
}
