/* Stand-in for F-Stack v1.25's tools/compat/ff_ipc.c: only the lines that kube-fstack's
 * tools-on-their-own-cpuset patch (dataplane-image/patches) changes or uses as context. */
#include <rte_mempool.h>
#include <rte_malloc.h>
#include <unistd.h>

#include "ff_ipc.h"

/* ... */
int
ff_ipc_init(void)
{
    if (inited) {
        return 0;
    }

    char *dpdk_argv[] = {
        "ff-ipc", "-c1", "-n4",
        "--proc-type=secondary",
        /* RTE_LOG_WARNING */
        "--log-level=5",
    };
/* ... */
}
