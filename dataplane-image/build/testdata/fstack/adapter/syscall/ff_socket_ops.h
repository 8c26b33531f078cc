/* Stand-in for F-Stack v1.25's adapter/syscall/ff_socket_ops.h: only the lines kube-fstack's
 * context-reclaim patch (dataplane-image/patches) changes or uses as context, the last of them
 * the file's end. */
/* ... */
    FF_SO_SELECT,
};

enum FF_SO_CONTEXT_STATUS {
    FF_SC_IDLE,
    FF_SC_REQ,
/* ... */
    int refcount;
    void *ff_thread_handle;
    volatile int forking;
} __attribute__((aligned(RTE_CACHE_LINE_SIZE)));

extern __FF_THREAD struct ff_socket_ops_zone *ff_so_zone;
/* ... */
struct ff_so_context *ff_attach_so_context(int proc_id);
void ff_detach_so_context(struct ff_so_context *context);

#endif
