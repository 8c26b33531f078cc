/* Stand-in for F-Stack's ff_* tools (ff_traffic, ff_netstat, ff_top), for the stand-in image:
 * F-Stack cannot be built on this project's machines. What it stands in for is how the real
 * tools start: a DPDK secondary whose EAL argv is tools/compat/ff_ipc.c's, as kube-fstack's
 * patch 0006-tools-on-their-own-cpuset leaves it: "-c1" (lcore 0 on CPU 0) unless
 * KUBE_FSTACK_TOOL_CPU names a CPU, then "--lcores=0@<CPU>"; and --no-pci. So in a container whose cpuset lacks
 * CPU 0 it fails as the real tool does ("Cannot set affinity") unless run through fstack-tool.
 * Once attached it reads the primary's port counters (there is no F-Stack stack to ask) and
 * prints them in the real tool's format where a caller parses it (ff_traffic -s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libgen.h>

#include <rte_eal.h>
#include <rte_ethdev.h>

static const char *tool_name(char *argv0)
{
    const char *n = basename(argv0);
    return strncmp(n, "ff_", 3) == 0 ? n + 3 : n;
}

int main(int argc, char **argv)
{
    const char *name = tool_name(argv[0]);
    char lcores[32] = "-c1";
    const char *tool_cpu = getenv("KUBE_FSTACK_TOOL_CPU");
    if (tool_cpu != NULL) {
        size_t n = strlen(tool_cpu);
        if (n > 0 && n < 6 && strspn(tool_cpu, "0123456789") == n) {
            snprintf(lcores, sizeof(lcores), "--lcores=0@%s", tool_cpu);
        } else {
            fprintf(stderr, "ignoring KUBE_FSTACK_TOOL_CPU=%s: not a CPU number\n", tool_cpu);
        }
    }
    char *dpdk_argv[] = {"ff-ipc", lcores, "-n4", "--proc-type=secondary", "--no-pci", "--log-level=5"};

    int proc = 0, oneshot = 0, opt;
    const char *procopt = strcmp(name, "netstat") == 0 ? "t:" : "p:";
    char optstring[16];
    snprintf(optstring, sizeof(optstring), "%ssP:d:n:a", procopt);
    opterr = 0;
    while ((opt = getopt(argc, argv, optstring)) != -1) {
        if (opt == procopt[0]) {
            proc = atoi(optarg);
        } else if (opt == 's') {
            oneshot = 1;
        }
    }

    if (rte_eal_init(sizeof(dpdk_argv) / sizeof(dpdk_argv[0]), dpdk_argv) < 0) {
        rte_exit(EXIT_FAILURE, "Error with EAL initialization\n");
    }
    fprintf(stderr, "stand-in ff_%s (not F-Stack): attached to the primary on lcore 0, CPU %s; process %d\n",
            name, tool_cpu ? tool_cpu : "0", proc);

    struct rte_eth_stats sum, s;
    memset(&sum, 0, sizeof(sum));
    uint16_t port;
    RTE_ETH_FOREACH_DEV(port) {
        if (rte_eth_stats_get(port, &s) == 0) {
            sum.ipackets += s.ipackets;
            sum.ibytes += s.ibytes;
            sum.opackets += s.opackets;
            sum.obytes += s.obytes;
            sum.imissed += s.imissed;
            sum.oerrors += s.oerrors;
        }
    }
    if (strcmp(name, "traffic") == 0) {
        if (!oneshot) {
            printf("|rx packets|rx bytes|tx packets|tx bytes|rx dropped|tx dropped|\n");
        }
        printf("%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
               sum.ipackets, sum.ibytes, sum.opackets, sum.obytes, sum.imissed, sum.oerrors);
    } else if (strcmp(name, "top") == 0) {
        printf("|---------|---------|---------|---------------|\n");
        printf("|   idle  |   sys   |   usr   |     loop      |\n");
        printf("|---------|---------|---------|---------------|\n");
        printf("|  0.00%%  |  0.00%%  |  0.00%%  |  %12u |\n", 0u);
    } else {
        printf("Active Internet connections (stand-in ff_%s: no F-Stack stack; process %d)\n", name, proc);
        printf("Proto Recv-Q Send-Q Local Address Foreign Address (state)\n");
        printf("stand-in: the primary's ports carried rx %" PRIu64 " tx %" PRIu64 " packets\n", sum.ipackets, sum.opackets);
    }
    rte_eal_cleanup();
    return 0;
}
