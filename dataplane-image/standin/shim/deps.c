/*
 * Stands in for the real shim's own dependencies (docs/fstack-rules.md §5 and §8):
 * F-Stack's libff_syscall.so links DPDK statically and needs libnuma.so.1 (DPDK's EAL) and
 * libatomic.so.1 (DPDK's drivers) besides libcrypto and libz, which stock app images such as
 * Debian's nginx do not have. A missing dependency of an LD_PRELOAD object is fatal to glibc's
 * loader: every program of the app container then exits 127 before main. build.sh links this
 * library with both, not as-needed, so an app image lacking them fails exactly as with F-Stack
 * unless the shim carries them (dataplane-image/build/package.sh shim-libs).
 */
#include <numa.h>
#include <stddef.h>

#include "standin.h"

/* Referenced from the socket hook so the dependency is real, not only a DT_NEEDED entry. */
int standin_numa_nodes(void)
{
	static __int128 probe;

	if (!__atomic_is_lock_free(sizeof(probe), &probe) && numa_available() < 0)
		return 1;
	return numa_available() < 0 ? 1 : numa_max_node() + 1;
}
