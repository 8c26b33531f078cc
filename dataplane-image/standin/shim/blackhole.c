/*
 * Stands in for: F-Stack's rendered config sets net.inet.tcp.blackhole=1, so a SYN to a port
 * nobody listens on is dropped instead of answered with a reset (docs/fstack-rules.md §9). A
 * client under the shim that connects to a closed port gets no answer at all: its non-blocking
 * connect stays in progress until the client gives up. The probe agent meets this whenever the
 * app is not listening yet, and must report it as the app's answer within the probe's timeout.
 *
 * The stand-in keeps kernel sockets, whose loopback answers a closed port with a reset. So a
 * non-blocking stream connect() to a loopback address that the kernel refuses, at once or later
 * through SO_ERROR, is reported as still in progress, forever. Blocking connects are left alone
 * (under the real shim they fail with EPERM at once, docs/fstack-rules.md §5).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "standin.h"

#define MAX_TRACKED 65536

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*getsockopt_fn)(int, int, int, void *, socklen_t *);

/* dropped[fd] is set while fd's last connect went to a loopback address: a refusal is hidden. */
static unsigned char dropped[MAX_TRACKED];

static int is_loopback(const struct sockaddr *addr, socklen_t len)
{
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in in;

		memcpy(&in, addr, sizeof(in));
		return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
	}
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 in6;

		memcpy(&in6, addr, sizeof(in6));
		return IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127);
	}
	return 0;
}

static getsockopt_fn real_getsockopt(void)
{
	static getsockopt_fn fn;

	if (!fn)
		fn = (getsockopt_fn)dlsym(RTLD_NEXT, "getsockopt");
	return fn;
}

static int nonblocking_stream(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || !(fl & O_NONBLOCK))
		return 0;
	return real_getsockopt()(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

static void announce(int port)
{
	char msg[160];

	if (port > 0)
		snprintf(msg, sizeof(msg), "connect() to closed loopback port %d left without an answer (F-Stack drops a SYN to a closed port: net.inet.tcp.blackhole)", port);
	else
		snprintf(msg, sizeof(msg), "connect() to a closed loopback port left without an answer (F-Stack drops a SYN to a closed port: net.inet.tcp.blackhole)");
	standin_announce("blackhole", msg);
}

static int port_of(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)addr)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	static connect_fn next;
	int r, track;

	if (!next)
		next = (connect_fn)dlsym(RTLD_NEXT, "connect");
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	track = fd >= 0 && fd < MAX_TRACKED && addr && is_loopback(addr, len) && nonblocking_stream(fd);
	if (fd >= 0 && fd < MAX_TRACKED)
		dropped[fd] = (unsigned char)track;
	r = next(fd, addr, len);
	if (r < 0 && errno == ECONNREFUSED && track) {
		announce(port_of(addr));
		errno = EINPROGRESS;
	}
	return r;
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	getsockopt_fn next = real_getsockopt();
	int r;

	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	r = next(fd, level, name, val, len);
	if (r == 0 && level == SOL_SOCKET && name == SO_ERROR && fd >= 0 && fd < MAX_TRACKED && dropped[fd] &&
	    val && len && *len >= sizeof(int) && *(int *)val == ECONNREFUSED) {
		*(int *)val = 0; /* no answer yet, and none will come */
		announce(0);
	}
	return r;
}
