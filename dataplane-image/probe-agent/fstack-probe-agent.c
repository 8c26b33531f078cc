/*
 * fstack-probe-agent: performs the kubelet's tcpSocket, httpGet and grpc probes of an app that
 * listens only inside F-Stack. fstack-supervisor starts it once per dataplane generation with
 * libff_syscall.so preloaded, so its sockets are F-Stack's, and asks it one request at a time:
 *
 *   on stdin:  "tcp <addr> <port> <timeout_ms>\n"
 *              "http <addr> <port> <timeout_ms> <nbytes>\n" then <nbytes> of a complete request
 *              "grpc <addr> <port> <timeout_ms> <nbytes>\n" then the <nbytes> service name
 *              "ping\n": the supervisor's liveness check of the agent itself
 *   on fd 3:   "ready fstack|kernel\n" once, then one line per request:
 *              "ok connected" | "ok <http status>" | "ok SERVING" | "fail <reason>" | "pong"
 *
 * Answers go to fd 3 because the shim prints its own log on stdout. One long-lived process: each
 * shim client attaches as a DPDK secondary (about 0.1 s) and holds one of the instance's 32
 * contexts, so the agent attaches once and reuses that context for every probe.
 *
 * What the shim allows a client (docs/fstack-rules.md §5): poll() is not hooked and a blocking connect()
 * fails with EPERM, so the socket is made non-blocking (FIONBIO, as Nginx does) and the connect
 * is waited for by re-checking SO_ERROR and getpeername() with short sleeps; reads and writes
 * retry on EAGAIN. Every wait is bounded by the request's timeout, and the answer comes within
 * it: the supervisor takes silence past it for a stuck agent. A closed port gets no answer at
 * all from F-Stack (net.inet.tcp.blackhole=1 drops the SYN), which is the app's answer too.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define REPLY_FD 3
#define MAX_REQUEST 16384
#define STATUS_BUF 256

static void reply(const char *fmt, const char *arg)
{
	char line[512];
	int n = snprintf(line, sizeof(line) - 1, fmt, arg);
	ssize_t off = 0;

	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	while (off < n) {
		ssize_t w = write(REPLY_FD, line + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			exit(1); /* the supervisor is gone */
		off += w;
	}
}

/* parse_addr fills sa from a numeric IPv4 or IPv6 address and a port. */
static int parse_addr(const char *addr, int port, struct sockaddr_storage *sa, socklen_t *len)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;

	memset(sa, 0, sizeof(*sa));
	if (port < 1 || port > 65535)
		return -1;
	if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		*len = sizeof(*v4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		*len = sizeof(*v6);
		return 0;
	}
	return -1;
}

/* open_connected returns a connected non-blocking socket, or -1 with *why set. */
static int open_connected(const struct sockaddr_storage *sa, socklen_t len, long long deadline, const char **why)
{
	int fd = socket(sa->ss_family, SOCK_STREAM, 0);
	int on = 1;

	if (fd < 0) {
		*why = strerror(errno);
		return -1;
	}
	if (ioctl(fd, FIONBIO, &on) < 0) {
		*why = "cannot make the socket non-blocking";
		close(fd);
		return -1;
	}
	if (connect(fd, (const struct sockaddr *)sa, len) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EALREADY && errno != EAGAIN && errno != EINTR) {
		*why = strerror(errno);
		close(fd);
		return -1;
	}
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int err = 0;
		socklen_t elen = sizeof(err);

		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err != 0) {
			*why = strerror(err);
			close(fd);
			return -1;
		}
		if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
			return fd;
		if (now_ms() >= deadline) {
			*why = "no answer from the app within the probe's timeout (nothing listening there? F-Stack drops a SYN to a closed port)";
			close(fd);
			return -1;
		}
		pause_briefly();
	}
}

/* read_status reads until the status line is complete and returns its code, or -1 with *why. */
static int read_status(int fd, long long deadline, const char **why)
{
	char buf[STATUS_BUF];
	size_t have = 0;

	for (;;) {
		ssize_t r = read_some(fd, buf + have, sizeof(buf) - 1 - have, deadline, why);

		if (r < 0)
			return -1;
		if (r == 0) {
			*why = have ? "connection closed inside the status line" : "connection closed before any response";
			return -1;
		}
		have += r;
		buf[have] = 0;
		if (strchr(buf, '\n') || have == sizeof(buf) - 1)
			break;
	}
	/* "HTTP/1.x NNN ..." */
	if (strncmp(buf, "HTTP/", 5) != 0 || !strchr(buf, ' ')) {
		*why = "the response is not HTTP";
		return -1;
	}
	{
		const char *code = strchr(buf, ' ') + 1;
		if (code[0] < '1' || code[0] > '5' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9') {
			*why = "the response has no status code";
			return -1;
		}
		return (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
	}
}

static void probe(const char *kind, const char *addr, int port, long timeout_ms, const char *req, size_t reqlen)
{
	struct sockaddr_storage sa;
	socklen_t len;
	long long deadline = now_ms() + timeout_ms;
	const char *why = "";
	char code[16];
	int fd, status;

	if (parse_addr(addr, port, &sa, &len) < 0) {
		reply("fail bad address or port%s", "");
		return;
	}
	fd = open_connected(&sa, len, deadline, &why);
	if (fd < 0) {
		reply("fail connect: %s", why);
		return;
	}
	if (strcmp(kind, "tcp") == 0) {
		close(fd);
		reply("ok connected%s", "");
		return;
	}
	if (strcmp(kind, "grpc") == 0) {
		static const char *names[] = { "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" };
		char authority[80];

		snprintf(authority, sizeof(authority), strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
		status = grpc_health(fd, authority, req, reqlen, deadline, &why);
		close(fd);
		if (status < 0)
			reply("fail %s", why);
		else if (status == 1)
			reply("ok %s", names[1]);
		else
			reply("fail health status %s", status < 4 ? names[status] : "unknown");
		return;
	}
	if (send_all(fd, req, reqlen, deadline) < 0) {
		close(fd);
		reply("fail sending the request: %s", now_ms() >= deadline ? "timed out" : strerror(errno));
		return;
	}
	status = read_status(fd, deadline, &why);
	close(fd);
	if (status < 0) {
		reply("fail %s", why);
		return;
	}
	snprintf(code, sizeof(code), "%d", status);
	reply("ok %s", code);
}

static int read_exact(char *buf, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t r = read(0, buf + off, n - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += r;
	}
	return 0;
}

/* warm_up attaches to F-Stack before the first probe and says whose sockets the agent gets:
 * the shim numbers its sockets from RLIMIT_NOFILE up, so a lower fd is a kernel socket (the
 * shim did not attach and fell back, or this is not F-Stack). */
static const char *warm_up(void)
{
	struct rlimit rl;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	const char *whose = "kernel";

	if (fd >= 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && (rlim_t)fd >= rl.rlim_cur)
		whose = "fstack";
	if (fd >= 0)
		close(fd);
	return whose;
}

int main(void)
{
	char line[256];
	size_t have = 0;
	static char req[MAX_REQUEST];

	signal(SIGPIPE, SIG_IGN);
	reply("ready %s", warm_up());
	for (;;) {
		char kind[8], addr[64];
		int port, n;
		long timeout_ms;
		size_t reqlen = 0;
		ssize_t r = read(0, line + have, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0; /* stdin closed: the supervisor stops us; exiting releases the context */
		if (line[have] != '\n') {
			if (++have == sizeof(line)) {
				reply("fail request line too long%s", "");
				return 1;
			}
			continue;
		}
		line[have] = 0;
		have = 0;
		if (strcmp(line, "ping") == 0) {
			reply("pong%s", "");
			continue;
		}
		n = sscanf(line, "%7s %63s %d %ld %zu", kind, addr, &port, &timeout_ms, &reqlen);
		if (n >= 4 && strcmp(kind, "tcp") == 0) {
			probe(kind, addr, port, timeout_ms, NULL, 0);
		} else if (n == 5 && strcmp(kind, "http") == 0 && reqlen > 0 && reqlen <= MAX_REQUEST) {
			if (read_exact(req, reqlen) < 0)
				return 1;
			probe(kind, addr, port, timeout_ms, req, reqlen);
		} else if (n == 5 && strcmp(kind, "grpc") == 0 && reqlen <= 200) {
			if (reqlen && read_exact(req, reqlen) < 0)
				return 1;
			probe(kind, addr, port, timeout_ms, req, reqlen);
		} else {
			reply("fail bad request line%s", "");
			return 1;
		}
	}
}
