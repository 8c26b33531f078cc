/*
 * The kubelet's gRPC probe, performed through F-Stack: the standard health check
 * (grpc.health.v1.Health/Check) over HTTP/2 without TLS, with prior knowledge, as the kubelet
 * sends it. SERVING passes; any other status, an error, or a call ended without a status fails.
 *
 * A minimal client for one call of a few bytes: one stream, the peer's initial flow-control
 * window (far above what the answer needs), request headers as HPACK literals (no Huffman, no
 * dynamic table), and the response's headers never decoded: the health status comes in the
 * DATA frame, and a response without one is a failure whatever its trailers say.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"

#define FRAME_DATA 0x0
#define FRAME_HEADERS 0x1
#define FRAME_RST_STREAM 0x3
#define FRAME_SETTINGS 0x4
#define FRAME_PING 0x6
#define FRAME_GOAWAY 0x7
#define FLAG_ACK 0x1
#define FLAG_END_STREAM 0x1
#define FLAG_END_HEADERS 0x4
#define FLAG_PADDED 0x8
#define MAX_FRAME 16384 /* SETTINGS_MAX_FRAME_SIZE's default: we never raise it */
#define MAX_MESSAGE 1024

static size_t put_varint(unsigned char *p, size_t v);

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t frame_header(unsigned char *p, size_t len, int type, int flags, uint32_t stream)
{
	p[0] = len >> 16;
	p[1] = len >> 8;
	p[2] = len;
	p[3] = type;
	p[4] = flags;
	p[5] = (stream >> 24) & 0x7f;
	p[6] = stream >> 16;
	p[7] = stream >> 8;
	p[8] = stream;
	return 9;
}

/* hpack_int writes an HPACK integer with an n-bit prefix whose high bits are first. */
static size_t hpack_int(unsigned char *p, unsigned char first, int n, size_t v)
{
	size_t i = 0, max = (1u << n) - 1;

	if (v < max) {
		p[i++] = first | v;
		return i;
	}
	p[i++] = first | max;
	for (v -= max; v >= 128; v >>= 7)
		p[i++] = (v & 0x7f) | 0x80;
	p[i++] = v;
	return i;
}

static size_t hpack_string(unsigned char *p, const char *s, size_t len)
{
	size_t i = hpack_int(p, 0, 7, len);

	memcpy(p + i, s, len);
	return i + len;
}

/* literal is "literal header field without indexing", the name by static table index or given. */
static size_t literal(unsigned char *p, int index, const char *name, const char *value)
{
	size_t i = hpack_int(p, 0, 4, index);

	if (index == 0)
		i += hpack_string(p + i, name, strlen(name));
	return i + hpack_string(p + i, value, strlen(value));
}

/* request writes the whole call: preface, empty SETTINGS, HEADERS, and the one DATA frame. */
static size_t request(unsigned char *p, const char *authority, const char *service, size_t service_len)
{
	unsigned char hb[512], msg[8 + 256];
	size_t n = 0, h = 0, m = 5;

	hb[h++] = 0x83; /* :method POST (static 3) */
	hb[h++] = 0x86; /* :scheme http (static 6) */
	h += literal(hb + h, 4, NULL, "/grpc.health.v1.Health/Check");
	h += literal(hb + h, 1, NULL, authority);
	h += literal(hb + h, 31, NULL, "application/grpc");
	h += literal(hb + h, 0, "te", "trailers");
	if (service_len) { /* HealthCheckRequest{service = 1} */
		msg[m++] = 0x0a;
		m += put_varint(msg + m, service_len);
		memcpy(msg + m, service, service_len);
		m += service_len;
	}
	msg[0] = 0; /* not compressed */
	msg[1] = (m - 5) >> 24;
	msg[2] = (m - 5) >> 16;
	msg[3] = (m - 5) >> 8;
	msg[4] = m - 5;
	memcpy(p, preface, sizeof(preface) - 1);
	n = sizeof(preface) - 1;
	n += frame_header(p + n, 0, FRAME_SETTINGS, 0, 0);
	n += frame_header(p + n, h, FRAME_HEADERS, FLAG_END_HEADERS, 1);
	memcpy(p + n, hb, h);
	n += h;
	n += frame_header(p + n, m, FRAME_DATA, FLAG_END_STREAM, 1);
	memcpy(p + n, msg, m);
	return n + m;
}

static size_t put_varint(unsigned char *p, size_t v)
{
	size_t i = 0;

	for (; v >= 0x80; v >>= 7)
		p[i++] = (v & 0x7f) | 0x80;
	p[i++] = v;
	return i;
}

static int get_varint(const unsigned char *p, size_t n, size_t *i, uint64_t *v)
{
	int shift = 0;

	*v = 0;
	while (*i < n && shift < 64) {
		unsigned char b = p[(*i)++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
		shift += 7;
	}
	return -1;
}

/* health_status reads HealthCheckResponse{status = 1}; absent means UNKNOWN (0). */
static int health_status(const unsigned char *p, size_t n)
{
	size_t i = 0;
	uint64_t key, v;
	int status = 0;

	while (i < n) {
		if (get_varint(p, n, &i, &key) < 0)
			return -1;
		switch (key & 7) {
		case 0:
			if (get_varint(p, n, &i, &v) < 0)
				return -1;
			if (key >> 3 == 1)
				status = (int)v;
			break;
		case 1:
			i += 8;
			break;
		case 2:
			if (get_varint(p, n, &i, &v) < 0 || v > n - i)
				return -1;
			i += v;
			break;
		case 5:
			i += 4;
			break;
		default:
			return -1;
		}
	}
	return i == n ? status : -1;
}

int grpc_health(int fd, const char *authority, const char *service, size_t service_len, long long deadline, const char **why)
{
	static unsigned char out[1024], in[MAX_FRAME];
	unsigned char msg[MAX_MESSAGE];
	size_t have = 0;

	if (service_len > 200 || strlen(authority) > 100) {
		*why = "service name too long";
		return -1;
	}
	if (send_all(fd, out, request(out, authority, service, service_len), deadline) < 0) {
		*why = "could not send the call";
		return -1;
	}
	for (;;) {
		unsigned char h[9], ack[9 + 8];
		size_t len, off = 0;
		int type, flags;
		uint32_t stream;

		if (read_full(fd, h, 9, deadline, why) < 0)
			return -1;
		len = (size_t)h[0] << 16 | h[1] << 8 | h[2];
		type = h[3];
		flags = h[4];
		stream = ((uint32_t)h[5] & 0x7f) << 24 | h[6] << 16 | h[7] << 8 | h[8];
		if (len > MAX_FRAME) {
			*why = "the server sent a frame larger than allowed";
			return -1;
		}
		if (len && read_full(fd, in, len, deadline, why) < 0)
			return -1;
		switch (type) {
		case FRAME_SETTINGS:
		case FRAME_PING:
			if (!(flags & FLAG_ACK)) {
				size_t n = frame_header(ack, type == FRAME_PING ? 8 : 0, type, FLAG_ACK, 0);
				if (type == FRAME_PING && len == 8)
					memcpy(ack + n, in, 8), n += 8;
				if (send_all(fd, ack, n, deadline) < 0) {
					*why = "could not answer the server's settings";
					return -1;
				}
			}
			break;
		case FRAME_GOAWAY:
			*why = "the server refused the connection (GOAWAY)";
			return -1;
		case FRAME_RST_STREAM:
			if (stream == 1) {
				*why = "the server reset the call (is it a gRPC server over HTTP/2 without TLS?)";
				return -1;
			}
			break;
		case FRAME_HEADERS:
			if (stream == 1 && (flags & FLAG_END_STREAM)) {
				*why = "the call ended without a health status (grpc-status not OK: is the health service registered?)";
				return -1;
			}
			break;
		case FRAME_DATA:
			if (stream != 1)
				break;
			if (flags & FLAG_PADDED) {
				if (len < 1 || in[0] >= len) {
					*why = "bad padding";
					return -1;
				}
				off = 1;
				len -= in[0];
			}
			if (have + len - off > sizeof(msg)) {
				*why = "the health answer is too large";
				return -1;
			}
			memcpy(msg + have, in + off, len - off);
			have += len - off;
			if (have >= 5) {
				size_t mlen = (size_t)msg[1] << 24 | (size_t)msg[2] << 16 | (size_t)msg[3] << 8 | msg[4];
				if (msg[0] != 0) {
					*why = "the health answer is compressed";
					return -1;
				}
				if (have >= 5 + mlen) {
					int status = health_status(msg + 5, mlen);
					if (status < 0)
						*why = "the health answer is not a HealthCheckResponse";
					return status;
				}
			}
			if (flags & FLAG_END_STREAM) {
				*why = "the call ended inside the health answer";
				return -1;
			}
			break;
		default: /* WINDOW_UPDATE, PRIORITY, CONTINUATION, unknown: nothing to do */
			break;
		}
	}
}
