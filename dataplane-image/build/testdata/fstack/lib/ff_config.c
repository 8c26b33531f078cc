/* Stand-in for F-Stack v1.25's lib/ff_config.c: only the lines of dpdk_args_setup that the
 * two kube-fstack patches (dataplane-image/patches) change or use as context. */
static void dpdk_args_setup(void) {
/* ... */
        }
        sprintf(temp, "--no-pci");
        dpdk_argv[n++] = strdup(temp);
        if (!cfg->dpdk.file_prefix) {
            sprintf(temp, "--file-prefix=container");
            dpdk_argv[n++] = strdup(temp);
        }
    }

    if (cfg->dpdk.nb_bond) {
/* ... */
        }
    }

    dpdk_argc = n;

    for (i=0; i<n; i++)
}
