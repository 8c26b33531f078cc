/*
 * The stand-in shim says what it is the first time each of its hooks acts in a process, so a
 * log reader never mistakes an app running under it for one running on F-Stack, and sees every
 * behaviour it stood in for. Not a constructor: every command run in an app container
 * (kubectl exec, exec probes) would print it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "standin.h"

#ifndef STANDIN_SHIM_MODE
#error "build with -DSTANDIN_SHIM_MODE=\"<mode>\" (build.sh does)"
#endif

#define KINDS 8

const char *standin_mode(void)
{
	return STANDIN_SHIM_MODE;
}

void standin_announce(const char *kind, const char *what)
{
	static const char *seen[KINDS];
	static int lock;
	int i, first = 1;

	while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
		;
	for (i = 0; i < KINDS && seen[i]; i++)
		if (strcmp(seen[i], kind) == 0)
			first = 0;
	if (first && i < KINDS)
		seen[i] = kind;
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	if (first)
		fprintf(stderr, "kube-fstack stand-in libff_syscall.so (not F-Stack) for mode %s in pid %d: %s\n", standin_mode(), (int)getpid(), what);
}
