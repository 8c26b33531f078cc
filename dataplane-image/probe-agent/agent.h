/* Shared by the probe agent's files (see fstack-probe-agent.c); sockio.c defines the I/O. */
#ifndef KUBE_FSTACK_PROBE_AGENT_H
#define KUBE_FSTACK_PROBE_AGENT_H

#include <stddef.h>
#include <sys/types.h>

/* now_ms is a monotonic clock in milliseconds; every wait is bounded by a deadline on it. */
long long now_ms(void);
/* pause_briefly sleeps half a millisecond: the shim gives a client no way to block on a socket. */
void pause_briefly(void);
/* send_all writes n bytes to a non-blocking socket, retrying on EAGAIN until deadline. */
int send_all(int fd, const void *buf, size_t n, long long deadline);
/* read_some reads what is there (0 at end of stream), retrying on EAGAIN until deadline; -1 with
 * *why on failure. */
ssize_t read_some(int fd, char *buf, size_t n, long long deadline, const char **why);
/* read_full reads exactly n bytes, retrying on EAGAIN until deadline; -1 with *why on failure. */
int read_full(int fd, void *buf, size_t n, long long deadline, const char **why);
/* grpc_health asks grpc.health.v1.Health/Check on a connected socket and returns the serving
 * status (1 is SERVING), or -1 with *why. */
int grpc_health(int fd, const char *authority, const char *service, size_t service_len, long long deadline, const char **why);

#endif
