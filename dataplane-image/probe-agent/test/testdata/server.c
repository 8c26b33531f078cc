/*
 * A test app for the probe agent's tests: listens on the IPv4 wildcard (as Nginx's "listen 80"
 * does), prints the address it got, and answers every connection with the HTTP status given as
 * argv[1]. Run under the stand-in shim, its bind() moves to 127.0.0.1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	char buf[1024], resp[128];
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		perror("server");
		return 1;
	}
	printf("%s %d\n", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
	fflush(stdout);
	snprintf(resp, sizeof(resp), "HTTP/1.0 %s Test\r\nContent-Length: 0\r\n\r\n", argc > 1 ? argv[1] : "200");
	for (;;) {
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			continue;
		if (read(c, buf, sizeof(buf)) > 0 && write(c, resp, strlen(resp)) < 0)
			perror("write");
		close(c);
	}
}
