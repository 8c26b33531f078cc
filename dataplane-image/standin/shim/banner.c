/*
 * The stand-in shim says what it is, once per process, the first time it acts, so a log reader
 * never mistakes an app running under it for one running on F-Stack. Not a constructor: every
 * command run in an app container (kubectl exec, exec probes) would print it.
 */
#include <stdio.h>
#include <unistd.h>

#include "standin.h"

void standin_announce(const char *what)
{
	static int done;

	if (__atomic_exchange_n(&done, 1, __ATOMIC_SEQ_CST))
		return;
	fprintf(stderr, "kube-fstack stand-in libff_syscall.so (not F-Stack) in pid %d: %s\n", (int)getpid(), what);
}
