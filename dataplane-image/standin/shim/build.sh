#!/usr/bin/env bash
# Builds the stand-in libff_syscall.so from every C file beside this script, for one shim mode:
# as F-Stack's, the library's behaviour depends on the mode it was built for (fork.c acts only
# in the multi-sc modes), and the image holds one build per mode directory.
#   build.sh OUT.so [MODE]   MODE defaults to kernel-event+multi-sc, the StackInstance default
# Linked with libnuma and libatomic, not as-needed, as F-Stack's shim needs them (deps.c).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:?usage: build.sh OUT.so [MODE]}
mode=${2:-kernel-event+multi-sc}
case $mode in
  kernel-event+multi-sc | kernel-event | multi-sc | pipeline | thread-socket | multi-sc+polling) ;;
  *)
    echo "build.sh: unknown shim mode '$mode': use one of kernel-event+multi-sc kernel-event multi-sc pipeline thread-socket multi-sc+polling" >&2
    exit 2
    ;;
esac
gcc -shared -fPIC -O2 -Wall -Wextra -Werror -DSTANDIN_SHIM_MODE="\"$mode\"" -o "$out" "$here"/*.c -ldl -Wl,--no-as-needed -lnuma -latomic
