package podcontract

// The shim's own environment: libff_syscall.so reads it in every process that loads it. Only the
// app's own process tree gets it: the launcher adds it to its child's environment, never to the
// container's. In the container's environment it would reach every process started there
// (kubectl exec shells, exec probes, lifecycle hooks), and each that opened an inet socket would
// attach to F-Stack and hold one of its instance's 32 contexts, lost when the kubelet kills it.
const (
	// EnvPreload loads the shim: ShimDir/ShimLibrary, ahead of any preload the app has itself.
	EnvPreload = "LD_PRELOAD"
	// EnvShimInstances is the number of F-Stack processes (decimal; the shim assumes 1 without it).
	EnvShimInstances = "FF_NB_FSTACK_INSTANCE"
	// EnvShimProcID is the F-Stack process the app's first process uses; its forks use the next
	// ones, modulo EnvShimInstances. Always ShimProcID.
	EnvShimProcID = "FF_PROC_ID"
	// EnvShimInitialLcore is the CPU the shim's DPDK secondary runs on, as a hex mask despite its
	// name. Only the launcher computes it, from its own cpuset: a CPU outside the container's
	// cpuset makes the shim fall back to kernel sockets without a word.
	EnvShimInitialLcore = "FF_INITIAL_LCORE_ID"
)

// MaxShimLcore is the highest CPU EnvShimInitialLcore can name: the shim replaces a larger mask
// with CPU 2's (its INITIAL_LCORE_ID_MAX is 0x4000000000000) without a word, and a CPU outside
// the process's cpuset then makes it fall back to kernel sockets.
const MaxShimLcore = 50

// ShimProcID is EnvShimProcID's value: the app starts on process 0.
const ShimProcID = 0

// EnvInstances is what the injection tells the launcher: the number of F-Stack processes of the
// pod's stack (decimal, 1 to MaxInstances), which the launcher passes on as EnvShimInstances.
// The shim never reads this name, so nothing else in the container attaches to F-Stack.
const EnvInstances = "FSTACK_SHIM_INSTANCES"

// MaxInstances is the most F-Stack processes a stack has (spec.processes' maximum, and the most
// entries of a port's spec.ports[].processes): F-Stack's lcore mask has 64 bits. It bounds
// EnvInstances and the shim-context files (internal/shimctx). The CRD's markers cannot name a
// constant; api/v1alpha1's TestBoundsAreTheCRDs holds them equal.
const MaxInstances = 64

// ShimEnvNames are the shim's variables, which the container's environment never carries from
// the injection (a pod from an older injection still has them; the launcher replaces them).
func ShimEnvNames() []string {
	return []string{EnvPreload, EnvShimInstances, EnvShimProcID, EnvShimInitialLcore}
}

// EnvLcoreCPUs is what the supervisor gives every F-Stack process of a stack whose lcores share
// CPUs (spec.dpdk.lcoresPerCPU > 1, lab only): the CPU of each process, decimal, comma-separated,
// process k's at k (render.Result.FStackEnv). The image's patch 0003 to F-Stack
// (dataplane-image/patches) then passes EAL --lcores=<lcore>@<that CPU> instead of -c<lcore>;
// the native stand-in reads it the same way. F-Stack's Nginx gets it through an env directive,
// since Nginx clears its workers' environment before they call ff_init.
const EnvLcoreCPUs = "KUBE_FSTACK_LCORE_CPUS"
