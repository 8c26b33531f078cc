/*
 * Stands in for: an app under F-Stack's shim has no kernel listener (docs/fstack-rules.md §5). Its
 * AF_INET/AF_INET6 sockets live in F-Stack's own stack, which answers on the F-Stack ports'
 * addresses and, built with FF_LOOPBACK_SUPPORT, to clients under the shim at 127.0.0.1, but
 * never on the pod IP: the kubelet's httpGet and tcpSocket probes of the pod IP are refused.
 *
 * The stand-in keeps kernel sockets, so it moves every bind() of such a socket to a non-loopback
 * address (the wildcard or the pod IP) onto loopback (127.0.0.1, ::1): in the pod's network
 * namespace only processes inside the pod reach the app, the kube-fstack probe agent among them,
 * and the kubelet's probes of the pod IP fail as they do against real F-Stack.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "standin.h"

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static bind_fn real_bind(void)
{
	static bind_fn fn;

	if (!fn)
		fn = (bind_fn)dlsym(RTLD_NEXT, "bind");
	return fn;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	bind_fn next = real_bind();
	char msg[128];

	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in in;

		memcpy(&in, addr, sizeof(in));
		if ((ntohl(in.sin_addr.s_addr) >> 24) != 127) {
			snprintf(msg, sizeof(msg), "bind() to %s:%d moved to 127.0.0.1 (F-Stack serves no kernel listener)",
				 inet_ntoa(in.sin_addr), ntohs(in.sin_port));
			in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			standin_announce("listen", msg);
			return next(fd, (const struct sockaddr *)&in, sizeof(in));
		}
	} else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 in6;

		memcpy(&in6, addr, sizeof(in6));
		if (!IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) {
			snprintf(msg, sizeof(msg), "bind() to [...]:%d moved to [::1] (F-Stack serves no kernel listener)",
				 ntohs(in6.sin6_port));
			in6.sin6_addr = in6addr_loopback;
			in6.sin6_scope_id = 0;
			standin_announce("listen", msg);
			return next(fd, (const struct sockaddr *)&in6, sizeof(in6));
		}
	}
	return next(fd, addr, len);
}
