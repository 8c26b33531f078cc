/*
 * Socket I/O with deadlines, for the probe agent's files: the shim hooks no poll(), so every wait
 * is a retry on EAGAIN with a short sleep, bounded by the request's deadline (see
 * fstack-probe-agent.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pause_briefly(void)
{
	struct timespec ts = { 0, 500 * 1000 };

	nanosleep(&ts, NULL);
}

int send_all(int fd, const void *data, size_t n, long long deadline)
{
	const char *buf = data;
	size_t off = 0;

	while (off < n) {
		ssize_t w = write(fd, buf + off, n - off);
		if (w > 0) {
			off += w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (now_ms() >= deadline)
			return -1;
		pause_briefly();
	}
	return 0;
}

/*
 * read_some reads what is there (0 at end of stream), retrying on EAGAIN until deadline: the
 * shim hooks no poll(), so waiting is polling. -1 with *why on failure.
 */
ssize_t read_some(int fd, char *buf, size_t n, long long deadline, const char **why)
{
	for (;;) {
		ssize_t r = read(fd, buf, n);

		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			*why = strerror(errno);
			return -1;
		}
		if (now_ms() >= deadline) {
			*why = "timed out waiting for the response";
			return -1;
		}
		pause_briefly();
	}
}

int read_full(int fd, void *data, size_t n, long long deadline, const char **why)
{
	char *buf = data;
	size_t have = 0;

	while (have < n) {
		ssize_t r = read_some(fd, buf + have, n - have, deadline, why);

		if (r < 0)
			return -1;
		if (r == 0) {
			*why = "connection closed early";
			return -1;
		}
		have += r;
	}
	return 0;
}
