#!/usr/bin/env bash
# Builds the stand-in libff_syscall.so from every C file beside this script.
#   build.sh OUT.so
# Linked with libnuma and libatomic, not as-needed, as F-Stack's shim needs them (deps.c).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:?usage: build.sh OUT.so}
gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$out" "$here"/*.c -ldl -Wl,--no-as-needed -lnuma -latomic
