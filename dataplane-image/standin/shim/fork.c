/*
 * Stands in for the fork hook of F-Stack's shim built with FF_MULTI_SC (the modes
 * kernel-event+multi-sc, multi-sc and multi-sc+polling; docs/fstack-rules.md §6). There every
 * F-Stack socket() of a process attaches a context of its own, and ff_hook_fork hands the
 * process's forks those contexts in turn (scs[current_worker_id++]): an Nginx master with
 * `listen ... reuseport` opens one listening socket per worker, so worker i gets context i.
 * The counter never goes back, so the master's fork after the last context gets a NULL one and
 * the child dies with SIGSEGV at once. That is what happens when a worker dies (the OOM killer
 * SIGKILLs one): the master respawns it, every respawned worker segfaults, 44 of them within a
 * second on real F-Stack, then the master has no worker at all and the app serves nothing,
 * while F-Stack still completes handshakes on the master's listening sockets.
 *
 * Here: the first process holding a context slot (contexts.c) that opens AF_INET/AF_INET6 sockets
 * is the master; each such socket it opens is one context, and its k-th fork gets context k.
 * A child forked past the last context dies with SIGSEGV before fork() returns in it (no core
 * file: the stand-in leaves no litter where the real one might). After 44 such children the
 * master's fork() fails with EAGAIN, which leaves it without workers, the end state measured;
 * why the real one stops respawning was not found out, so that is the stand-in's way to get
 * there. The library knows its mode from the build (build.sh MODE); in the other modes, and
 * for processes that opened no socket (a shell forking the app) or were forked by the master,
 * fork() is untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "standin.h"

#ifndef STANDIN_SHIM_MODE
#error "build with -DSTANDIN_SHIM_MODE=\"<mode>\" (build.sh does)"
#endif

/* What the real master did before it stopped respawning (measured, docs/fstack-rules.md §6). */
#define FAULTED_FORKS_BEFORE_FAILING 44

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t master;  /* the process whose sockets are the contexts; copied into its children */
static int contexts;  /* sockets the master opened: the contexts its forks are handed */
static int handed;    /* forks of the master so far: the next one gets context `handed` */
static int faulted;   /* children that got no context */

static int multi_sc(void)
{
	return strstr(STANDIN_SHIM_MODE, "multi-sc") != NULL;
}

void standin_socket_opened(void)
{
	if (!multi_sc())
		return;
	pthread_mutex_lock(&mu);
	if (master == 0)
		master = getpid();
	if (master == getpid())
		contexts++;
	pthread_mutex_unlock(&mu);
}

/* null_context is the child's end: F-Stack's dies on its first use of the NULL context. */
static void null_context(int k, int n, int first)
{
	struct rlimit no_core = { 0, 0 };
	sigset_t segv;
	char msg[320];

	if (first) {
		snprintf(msg, sizeof(msg),
			 "fork %d of a master holding %d shim context(s): FF_MULTI_SC's fork hook hands each fork the next one and has none for this child, which dies with SIGSEGV at once as on F-Stack (so does every worker the master respawns)",
			 k + 1, n);
		standin_announce("fork-fault", msg);
	}
	setrlimit(RLIMIT_CORE, &no_core);
	signal(SIGSEGV, SIG_DFL);
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	sigprocmask(SIG_UNBLOCK, &segv, NULL);
	raise(SIGSEGV);
	_exit(128 + SIGSEGV);
}

pid_t fork(void)
{
	static pid_t (*real_fork)(void);
	int k, n, fault, first = 0;
	char msg[200];
	pid_t pid;

	if (!real_fork)
		real_fork = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	if (!real_fork) {
		errno = ENOSYS;
		return -1;
	}
	pthread_mutex_lock(&mu);
	if (!multi_sc() || master != getpid() || contexts == 0) {
		pthread_mutex_unlock(&mu);
		return real_fork();
	}
	k = handed++;
	n = contexts;
	fault = k >= n;
	if (fault && faulted >= FAULTED_FORKS_BEFORE_FAILING) {
		pthread_mutex_unlock(&mu);
		snprintf(msg, sizeof(msg), "%d children of this master died for want of a shim context: fork() now fails (EAGAIN), which leaves it without workers as on F-Stack",
			 FAULTED_FORKS_BEFORE_FAILING);
		standin_announce("fork-stop", msg);
		errno = EAGAIN;
		return -1;
	}
	if (fault)
		first = ++faulted == 1;
	pthread_mutex_unlock(&mu);

	pid = real_fork();
	if (pid == 0 && fault)
		null_context(k, n, first);
	if (pid > 0 && !fault) {
		snprintf(msg, sizeof(msg), "FF_MULTI_SC fork hook: this master's fork %d gets shim context %d of the %d its sockets hold; once they are handed out, a forked child gets none and dies with SIGSEGV",
			 k + 1, k + 1, n);
		standin_announce("fork", msg);
	}
	return pid;
}
