/*
 * forker SOCKETS FORKS: the part of an Nginx master the stand-in's fork hook sees. It opens
 * SOCKETS AF_INET sockets (a master's reuseport listeners, one per worker), then forks FORKS
 * children one after another, each exiting 0 at once, and prints one line per fork: "ok",
 * "signal N" (how the child died) or "fork failed: ERRNO".
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int sockets, forks, i, st;
	pid_t pid;

	if (argc != 3)
		return 2;
	sockets = atoi(argv[1]);
	forks = atoi(argv[2]);
	for (i = 0; i < sockets; i++)
		if (socket(AF_INET, SOCK_STREAM, 0) < 0)
			return 3;
	for (i = 0; i < forks; i++) {
		pid = fork();
		if (pid < 0) {
			printf("fork failed: %d\n", errno);
			continue;
		}
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &st, 0) != pid)
			return 4;
		if (WIFSIGNALED(st))
			printf("signal %d\n", WTERMSIG(st));
		else
			printf("ok\n");
	}
	return 0;
}
