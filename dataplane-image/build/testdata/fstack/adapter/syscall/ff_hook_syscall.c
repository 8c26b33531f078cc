/* Stand-in for F-Stack v1.25's adapter/syscall/ff_hook_syscall.c: only the lines of
 * ff_hook_fork and ff_adapter_init that kube-fstack's shim patches (--no-pci, context reclaim;
 * dataplane-image/patches) change or use as context. */
pid_t ff_hook_fork(void) {
/* ... */
        /* Parent process set refcount. */
        if (pid > 0) {
            sc->refcount++;
            ERR_LOG("parent process, chilid pid:%d, sc:%p, sc->refcount:%d, ff_so_zone:%p\n",
                pid, sc, sc->refcount, ff_so_zone);
#ifdef FF_MULTI_SC
/* ... */
#endif
        }
        else if (pid == 0) {
            ERR_LOG("chilid process, sc:%p, sc->refcount:%d, ff_so_zone:%p\n",
                sc, sc->refcount, ff_so_zone);
#ifdef FF_MULTI_SC
/* ... */
}

int ff_adapter_init(void) {
/* ... */
        char *dpdk_argv[] = {
            "ff-adapter", buf, "-n4",
            "--proc-type=secondary",
            /* RTE_LOG_WARNING */
            "--log-level=5",
        };
/* ... */
}
