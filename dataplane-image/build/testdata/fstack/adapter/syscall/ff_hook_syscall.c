/* Stand-in for F-Stack v1.25's adapter/syscall/ff_hook_syscall.c: only the lines of
 * ff_hook_setsockopt, ff_hook_fork and ff_adapter_init that kube-fstack's shim patches
 * (setsockopt's value, --no-pci, context reclaim; dataplane-image/patches) change or use as
 * context. */
int ff_hook_setsockopt(int fd, int level, int optname, const void *optval, socklen_t optlen) {
/* ... */
    if (optval != NULL) {
        if (sh_optval == NULL || sh_optval_len < optlen) {
            if (sh_optval) {
                share_mem_free(sh_optval);
            }

            sh_optval_len = optlen;
            sh_optval = share_mem_alloc(sh_optval_len);
            if (sh_optval == NULL) {
                RETURN_ERROR_NOFREE(ENOMEM);
            }
        }
    }

    args->fd = fd;
    args->level = level;
    args->name = optname;
    args->optval = sh_optval;
    args->optlen = optlen;

    SYSCALL(FF_SO_SETSOCKOPT, args);
/* ... */
}

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
