/* Shared by the stand-in shim's files (see README.md). */
#ifndef KUBE_FSTACK_STANDIN_H
#define KUBE_FSTACK_STANDIN_H

/*
 * standin_announce prints that the stand-in acted and what it did, the first time a hook of the
 * given kind (a string literal, e.g. "listen") acts in a process.
 */
void standin_announce(const char *kind, const char *what);

#endif
