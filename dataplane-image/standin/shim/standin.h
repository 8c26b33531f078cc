/* Shared by the stand-in shim's files (see README.md). */
#ifndef KUBE_FSTACK_STANDIN_H
#define KUBE_FSTACK_STANDIN_H

/* standin_announce prints, once per process, that the stand-in acted and what it did first. */
void standin_announce(const char *what);

#endif
