#include <stdio.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_memzone.h>
/* ... */
    return 0;
}

struct ff_so_context *
ff_attach_so_context(int idx)
{
/* ... */
            rte_spinlock_init(&sc->lock);
            sc->status = FF_SC_IDLE;
            sc->refcount = 1;
            ff_so_zone->free--;
            ff_so_zone->idx = idx + 1;
            break;
/* ... */
    rte_spinlock_lock(&ff_so_zone->lock);
    rte_spinlock_lock(&sc->lock);

    if (sc->refcount > 1) {
        ERR_LOG("sc refcount > 1, to sub it, sc:%p, ops:%d, status:%d, idx:%d, sc->refcount:%d, inuse:%d, so free:%u, idx:%u\n",
                sc, sc->ops, sc->status, sc->idx, sc->refcount, ff_so_zone->inuse[sc->idx], ff_so_zone->free, ff_so_zone->idx);
/* ... */
/* Stand-in for F-Stack v1.25's adapter/syscall/ff_so_zone.c: only the lines kube-fstack's
 * context-reclaim patch (dataplane-image/patches) changes or uses as context, the first of them
 * the file's start. */
