#!/usr/bin/env bash
# Builds the stand-in ff_* tools (fftool.c) against the machine's DPDK (Debian's, the same the
# stand-in image carries) as OUT_DIR/{traffic,netstat,top}: the names F-Stack's tools have in
# /usr/local/bin/f-stack, where the image's ff_<name> links (fstack-tool) find them.
#   build.sh OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:?usage: build.sh OUT_DIR}
pkg-config --exists libdpdk || { echo "build.sh: DPDK's headers are missing: apt-get install dpdk-dev (hack/install-deps.sh does)" >&2; exit 1; }
mkdir -p "$out"
# shellcheck disable=SC2046 # pkg-config's flags are words
gcc -O2 -Wall -Wextra -Werror -o "$out/traffic" "$here/fftool.c" $(pkg-config --cflags --libs libdpdk)
ln -f "$out/traffic" "$out/netstat"
ln -f "$out/traffic" "$out/top"
