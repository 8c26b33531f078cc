/* Stand-in for F-Stack v1.25's adapter/syscall/ff_hook_syscall.c: only the lines of
 * ff_adapter_init that kube-fstack's shim --no-pci patch (dataplane-image/patches) changes or
 * uses as context. */
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
