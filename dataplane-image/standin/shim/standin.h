/* Shared by the stand-in shim's files (see README.md). */
#ifndef KUBE_FSTACK_STANDIN_H
#define KUBE_FSTACK_STANDIN_H

/*
 * standin_announce prints that the stand-in acted and what it did, the first time a hook of the
 * given kind (a string literal, e.g. "listen") acts in a process.
 */
void standin_announce(const char *kind, const char *what);

/* standin_numa_nodes uses libnuma and libatomic, as the real shim's DPDK does (deps.c). */
int standin_numa_nodes(void);

/* standin_mode is the shim mode this library was built for (build.sh MODE). */
const char *standin_mode(void);

/*
 * standin_socket_opened tells fork.c that this process opened an AF_INET/AF_INET6 socket:
 * under FF_MULTI_SC each one is a shim context its forks are handed.
 */
void standin_socket_opened(void);

#endif
