#!/usr/bin/env bash
# Measures the stand-in dataplane image: time from container start to ready (/readyz) with 1 and
# 2 F-Stack processes (dpdk-testpmd behind a private OVS-DPDK, started by the supervisor from the
# image's own entrypoint and arguments), and the supervisor's RSS while it runs. Root; builds the
# image first if needed (make image-dataplane-standin). Figures are noisy on a shared 2-core
# machine: compare ratios from one run.
#
# IMAGE_TAR (an OCI archive, tag IMAGE_TAG, default dev) benches another dataplane image the same
# way, e.g. the real one built from dataplane-image/Dockerfile: its own entrypoint and arguments,
# against the same OVS port and hugepages. Ready includes the shim contexts' first reading. For
# pod create -> Ready on the local cluster with either image:
#   hack/bench-cluster.sh -dataplane-image=<image>
set -euo pipefail
cd "$(dirname "$0")/.."

TAR=${IMAGE_TAR:-.cache/images/dataplane-standin.oci.tar}
TAG=${IMAGE_TAG:-dev}
BUNDLE=.cache/dataplane-standin/bundle
[ -z "${IMAGE_TAR:-}" ] || BUNDLE=.cache/dataplane-bench/bundle
RUNS=${RUNS:-5}

[ -f "$TAR" ] || [ -n "${IMAGE_TAR:-}" ] || hack/image-dataplane-standin.sh
[ -f "$TAR" ] || { echo "bench-dataplane: no image archive $TAR" >&2; exit 1; }
layout=$(mktemp -d)
trap 'rm -rf "$layout"' EXIT
tar -C "$layout" -xf "$TAR"
rm -rf "$BUNDLE"
mkdir -p "$(dirname "$BUNDLE")"
umoci unpack --image "$layout:$TAG" "$BUNDLE" >/dev/null
echo "bench-dataplane: $TAR ($TAG) unpacked at $BUNDLE; $RUNS runs per process count"
STANDIN_BUNDLE=$PWD/$BUNDLE go test ./dataplane-image/test/dpdk -run '^$' -bench StandinTimeToReady \
  -benchtime "${RUNS}x" -count 1 -timeout 15m | grep -E 'Benchmark|ok|FAIL|---'
