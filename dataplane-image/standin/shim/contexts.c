/*
 * Stands in for the shim's context slots (docs/fstack-rules.md §5). Each F-Stack instance has
 * 32; a process's first F-Stack socket() attaches one, a clean exit gives it back, a process
 * killed with SIGKILL never does, and when none is free the shim silently hands out a kernel
 * socket. Upstream, repeated app restarts against one dataplane therefore end with the app on
 * the kernel; the image's F-Stack gives back, within a second, a context whose holders are all
 * gone, when they were in fstack's own pid namespace (patch 0007: a pod's containers share one).
 *
 * Here the slots are the first 32 bytes (0 free, 1 held) of
 * <runtime dir>/rte/kube_fstack_standin_contexts_<k>, which the supervisor
 * (--shim-contexts=standin) creates empty at each generation, as F-Stack's primary creates its
 * zones, and counts for its metrics and the launcher. The process takes a slot of instance
 * FF_PROC_ID mod FF_NB_FSTACK_INSTANCE on its first AF_INET/AF_INET6 socket() and gives it back
 * at exit(); the socket itself stays a kernel socket (this is not a network stack).
 *
 * As the image's F-Stack records a context's holders (patch 0007), a slot's holder is recorded
 * after the 32 bytes: 32 records of 16 bytes, {int32 pid, 4 unused, uint64 the inode of its pid
 * namespace}, little-endian, and the supervisor gives back, once a second as fstack does, a
 * held slot whose holder is gone and was in its own pid namespace (dataplane-image/standin/slots).
 * A held slot with pid 0 has no known holder and is never given back.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "standin.h"

#define SLOTS 32
/* The holders' records after the slots (slots.go: ownerOff, ownerSize). */
#define OWNER_OFF SLOTS
#define OWNER_SIZE 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t tried_by; /* the process that looked for a slot (a forked child looks again) */
static pid_t held_by;
static int held_slot = -1;
static char slot_path[4096];

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return def;
	n = strtol(v, &end, 10);
	return *end ? def : n;
}

static void give_back(void)
{
	int fd;

	if (held_by != getpid() || held_slot < 0)
		return;
	fd = open(slot_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX) == 0) {
		unsigned char none[OWNER_SIZE] = {0};

		if (pwrite(fd, none, sizeof(none), OWNER_OFF + (off_t)held_slot * OWNER_SIZE) == (ssize_t)sizeof(none) &&
		    pwrite(fd, "", 1, held_slot) == 1)
			held_slot = -1;
	}
	close(fd);
}

/* owner_record is this process's holder record: its pid and its pid namespace's inode. */
static void owner_record(unsigned char rec[OWNER_SIZE])
{
	struct stat st;
	int32_t pid = (int32_t)getpid();
	uint64_t ns = 0;
	int i;

	if (stat("/proc/self/ns/pid", &st) == 0)
		ns = (uint64_t)st.st_ino;
	memset(rec, 0, OWNER_SIZE);
	for (i = 0; i < 4; i++)
		rec[i] = (unsigned char)((uint32_t)pid >> (8 * i));
	for (i = 0; i < 8; i++)
		rec[8 + i] = (unsigned char)(ns >> (8 * i));
}

/* take_slot returns the slot taken in the file, -1 when all are held, -2 without a file. */
static int take_slot(const char *path)
{
	unsigned char b[SLOTS], rec[OWNER_SIZE];
	int fd, i, got = -1;

	owner_record(rec);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -2;
	if (flock(fd, LOCK_EX) == 0 && pread(fd, b, SLOTS, 0) == SLOTS) {
		/* The holder first: a slot is never seen held without its holder (F-Stack records it
		 * under the zone lock, in the same attach). */
		for (i = 0; i < SLOTS && got < 0; i++)
			if (b[i] == 0 && pwrite(fd, rec, OWNER_SIZE, OWNER_OFF + (off_t)i * OWNER_SIZE) == OWNER_SIZE &&
			    pwrite(fd, "\1", 1, i) == 1)
				got = i;
	}
	close(fd);
	return got;
}

static void attach(void)
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	long n = env_long("FF_NB_FSTACK_INSTANCE", 1), k;
	char msg[4400];
	int slot;

	if (n < 1)
		n = 1;
	if (standin_numa_nodes() < 1)
		return;
	k = env_long("FF_PROC_ID", 0) % n;
	snprintf(slot_path, sizeof(slot_path), "%s/dpdk/rte/kube_fstack_standin_contexts_%ld", rt && *rt ? rt : "/var/run", k);
	slot = take_slot(slot_path);
	if (slot >= 0) {
		held_slot = slot;
		held_by = getpid();
		atexit(give_back);
		snprintf(msg, sizeof(msg), "holds shim context %d of instance %ld (%s); exit gives it back, and after a SIGKILL the dataplane does", slot, k, slot_path);
	} else if (slot == -1) {
		snprintf(msg, sizeof(msg), "no free shim context in instance %ld (all %d held): using kernel sockets, silently as F-Stack does", k, SLOTS);
	} else {
		snprintf(msg, sizeof(msg), "no shim context file %s (is the supervisor run with --shim-contexts=standin?): using kernel sockets", slot_path);
	}
	standin_announce("contexts", msg);
}

int socket(int domain, int type, int protocol)
{
	static int (*real_socket)(int, int, int);
	int fd, attached;

	if (!real_socket)
		real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if (domain == AF_INET || domain == AF_INET6) {
		pthread_mutex_lock(&mu);
		if (tried_by != getpid()) {
			tried_by = getpid();
			attach();
		}
		attached = held_by == getpid() && held_slot >= 0;
		pthread_mutex_unlock(&mu);
		fd = real_socket(domain, type, protocol);
		/* A process on kernel sockets (no slot) is not F-Stack's: its forks are left alone. */
		if (fd >= 0 && attached)
			standin_socket_opened();
		return fd;
	}
	return real_socket(domain, type, protocol);
}
