package build_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	shippedTools = []string{"arp", "ifconfig", "ipfw", "knictl", "ndp", "netstat", "route", "sysctl", "top", "traffic"}
	shimModes    = map[string][]string{
		"kernel-event+multi-sc": {"-DFF_KERNEL_EVENT", "-DFF_MULTI_SC"},
		"kernel-event":          {"-DFF_KERNEL_EVENT"},
		"multi-sc":              {"-DFF_MULTI_SC"},
		"pipeline":              nil,
		"thread-socket":         {"-DFF_THREAD_SOCKET"},
		"multi-sc+polling":      {"-DFF_MULTI_SC", "-DFF_PRELOAD_POLLING_MODE"},
	}
	allFlags = []string{"-DFF_KERNEL_EVENT", "-DFF_MULTI_SC", "-DFF_THREAD_SOCKET", "-DFF_PRELOAD_POLLING_MODE"}
)

// The old Dockerfile's commands, run against the stand-in, fail (or pass silently) the way they
// did on real F-Stack v1.25: what makes each test below able to fail without its fix.
func TestStandInFailsLikeFStackUnderTheOldRecipe(t *testing.T) {
	r := newRecipe(t)
	out, err := r.sh("dpdk", "meson setup -Denable_kmods=false -Dtests=false -Ddisable_apps='*' build")
	if err == nil || !strings.Contains(out, "kernelversion` failed with status 2") {
		t.Errorf("meson setup without the kernel guard: err=%v, want the kernel header check to fail:\n%s", err, out)
	}

	r.write("tools/traffic/Makefile", "all:\n\t@echo traffic: compile error >&2; exit 1\n")
	out, err = r.sh("tools", "make -j2")
	if err != nil {
		t.Errorf("tools' own make with a failing subdirectory: %v, want exit 0 as upstream's loop gives:\n%s", err, out)
	}
	for _, missing := range []string{"ngctl", "traffic"} {
		if _, err := os.Stat(filepath.Join(r.tree, "tools/sbin", missing)); err == nil {
			t.Errorf("tools/sbin/%s was built; the stand-in should fail it", missing)
		}
	}

	if out, err := r.sh("lib", "make -j2"); err != nil {
		t.Fatalf("lib: %v\n%s", err, out)
	}
	out, err = r.sh("adapter/syscall", "make -j2 all")
	if err == nil || !strings.Contains(out, "cannot find -lff_syscall") {
		t.Errorf("adapter make -j2 all: err=%v, want the examples to race the library:\n%s", err, out)
	}
}

func TestPatchStepRestoresTheKernelGuardSoDPDKConfiguresWithoutHeaders(t *testing.T) {
	r := newRecipe(t)
	r.mustRun("patch")
	got := r.read(filepath.Join(r.tree, "dpdk/kernel/meson.build"))
	want := "if get_option('enable_kmods')\n    subdir(exec_env)\nendif\n"
	if !strings.Contains(got, want) || strings.Contains(got, "#if is_freebsd") {
		t.Fatalf("dpdk/kernel/meson.build after patch:\n%s\nwant the guard:\n%s", got, want)
	}
	// kube-fstack's own patches went in too (--fuzz=0, onto the stand-in's ff_config.c).
	cfg := r.read(filepath.Join(r.tree, "lib/ff_config.c"))
	if strings.Contains(cfg, "--file-prefix=container") || !strings.Contains(cfg, `strdup("--single-file-segments")`) ||
		!strings.Contains(cfg, `getenv("KUBE_FSTACK_LCORE_CPUS")`) {
		t.Errorf("lib/ff_config.c is not patched:\n%s", cfg)
	}
	// The zone lock is taken per pass over the contexts, not around the drain window.
	ops := r.read(filepath.Join(r.tree, "adapter/syscall/ff_socket_ops.c"))
	if strings.Count(ops, "rte_spinlock_lock(&ff_so_zone->lock);") != 1 || !strings.Contains(ops, "kube-fstack: hold the zone lock for one pass") {
		t.Errorf("adapter/syscall/ff_socket_ops.c is not patched:\n%s", ops)
	}
	// The shim's secondary probes no PCI device.
	hook := r.read(filepath.Join(r.tree, "adapter/syscall/ff_hook_syscall.c"))
	if !strings.Contains(hook, "\"--proc-type=secondary\",\n") || !strings.Contains(hook, "\"--no-pci\",\n            /* RTE_LOG_WARNING */") {
		t.Errorf("adapter/syscall/ff_hook_syscall.c is not patched:\n%s", hook)
	}

	// A context records its holders, and fstack's loop gives back those of dead holders.
	zone := r.read(filepath.Join(r.tree, "adapter/syscall/ff_so_zone.c"))
	if !strings.Contains(zone, "ff_reclaim_dead_contexts(void)") || !strings.Contains(zone, "ff_so_context_add_owner(sc, getpid());") {
		t.Errorf("adapter/syscall/ff_so_zone.c is not patched:\n%s", zone)
	}
	if !strings.Contains(ops, "ff_reclaim_dead_contexts();") || !strings.Contains(hook, "ff_so_context_add_owner(sc, pid);") ||
		!strings.Contains(r.read(filepath.Join(r.tree, "adapter/syscall/ff_socket_ops.h")), "int32_t owners[FF_SC_OWNERS_MAX];") {
		t.Errorf("the context reclaim is not patched in everywhere:\n%s\n%s", ops, hook)
	}

	// The shim's setsockopt sends the app's value, not whatever its shared buffer held.
	if !strings.Contains(hook, "rte_memcpy(sh_optval, optval, optlen);") || !strings.Contains(hook, "args->optval = optval != NULL ? sh_optval : NULL;") {
		t.Errorf("ff_hook_setsockopt is not patched:\n%s", hook)
	}

	// The tools' lcore runs on the CPU the wrapper names (fstack-tool), not CPU 0.
	ipc := r.read(filepath.Join(r.tree, "tools/compat/ff_ipc.c"))
	if !strings.Contains(ipc, `getenv("KUBE_FSTACK_TOOL_CPU")`) || !strings.Contains(ipc, `"ff-ipc", lcores, "-n4",`) ||
		!strings.Contains(ipc, `"--no-pci",`) {
		t.Errorf("tools/compat/ff_ipc.c is not patched:\n%s", ipc)
	}

	r.mustRun("dpdk")
	args := r.read(filepath.Join(r.tree, "dpdk/build/meson-args"))
	mustContain(t, "meson setup options", args, "platform=generic", "enable_kmods=false")
	if _, err := os.Stat(filepath.Join(r.tree, "dpdk/build/install.done")); err != nil {
		t.Errorf("ninja install did not run: %v", err)
	}
}

// The guard is restored by matching F-Stack v1.25's exact lines: a tree that differs must stop
// the build with a message, never be built with whatever the file now says.
func TestPatchStepFailsLoudlyWhenTheKernelGuardChangedUpstream(t *testing.T) {
	cases := map[string]string{
		"guard already restored":    "if is_freebsd\n    subdir(exec_env)\nendif\n",
		"no guard lines at all":     "subdir(exec_env)\n",
		"commented guard, no endif": "#if is_freebsd\n    subdir(exec_env)\n",
		"guard around another dir":  "#if is_freebsd\n    subdir('linux')\n#endif\n",
		"two commented guards":      "#if is_freebsd\n    subdir(exec_env)\n#endif\n#if is_freebsd\n    subdir(exec_env)\n#endif\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRecipe(t)
			r.write("dpdk/kernel/meson.build", content)
			out := r.mustFail("patch")
			mustContain(t, "patch output", out, "dpdk/kernel/meson.build", "upstream changed")
			if got := r.read(filepath.Join(r.tree, "dpdk/kernel/meson.build")); got != content {
				t.Errorf("the file changed though the step failed:\n%s", got)
			}
		})
	}
}

func TestToolsStepFailsOnAFailingTool(t *testing.T) {
	r := newRecipe(t)
	r.write("tools/traffic/Makefile", "all:\n\t@echo traffic: compile error >&2; exit 1\n")
	out := r.mustFail("tools")
	mustContain(t, "tools output", out, "tools: building traffic", "traffic: compile error")
	if strings.Contains(out, "tools: building knictl") {
		t.Errorf("the build went on after traffic failed:\n%s", out)
	}
}

func TestToolsStepFailsWhenAToolBuildsNothing(t *testing.T) {
	r := newRecipe(t)
	r.write("tools/top/Makefile", "all:\n\t@true\n")
	mustContain(t, "tools output", r.mustFail("tools"), "sbin/top was not built")
}

func TestToolsAreInstalledWhereTheImageCopiesThemFrom(t *testing.T) {
	r := newRecipe(t)
	r.mustRun("patch", "lib", "tools", "adapter", "install")
	entries, err := os.ReadDir(filepath.Join(r.out, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		if info, err := e.Info(); err != nil || info.Mode()&0o111 == 0 || !info.Mode().IsRegular() {
			t.Errorf("%s is not an executable file (%v)", e.Name(), err)
		}
	}
	// ngctl is skipped knowingly (lib has no FF_NETGRAPH; libnetgraph fails gcc 12), and nothing
	// else from sbin/ (its .gitignore) comes along.
	if !slices.Equal(got, shippedTools) {
		t.Errorf("%s/tools holds %v, want %v", r.out, got, shippedTools)
	}
}

func TestAdapterBuildsEveryShimModeWithoutRacing(t *testing.T) {
	r := newRecipe(t)
	r.mustRun("patch", "lib", "adapter")
	for mode, flags := range shimModes {
		fstack := r.read(filepath.Join(r.out, "shim", mode, "fstack"))
		lib := r.read(filepath.Join(r.out, "shim", mode, "libff_syscall.so"))
		for _, f := range allFlags {
			if want := slices.Contains(flags, f); strings.Contains(lib, f) != want || strings.Contains(fstack, f) != want {
				t.Errorf("mode %s: %s present should be %v:\nfstack: %slibff_syscall.so: %s", mode, f, want, fstack, lib)
			}
		}
		// lib is built with FF_LOOPBACK_SUPPORT (the probe agent needs it) and patched.
		mustContain(t, mode+"/fstack", fstack, "-DFF_LOOPBACK_SUPPORT", "single-file-segments:1")
	}
	if _, err := os.Stat(filepath.Join(r.tree, "adapter/syscall/helloworld_stack")); err == nil {
		t.Errorf("the examples were built; only fstack and libff_syscall.so are needed")
	}
}
