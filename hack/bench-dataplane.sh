#!/usr/bin/env bash
# Measures the stand-in dataplane image: time from container start to ready (/readyz) with 1 and
# 2 F-Stack processes (dpdk-testpmd behind a private OVS-DPDK, started by the supervisor from the
# image's own entrypoint and arguments), and the supervisor's RSS while it runs. Root; builds the
# image first if needed (make image-dataplane-standin). Figures are noisy on a shared 2-core
# machine: compare ratios from one run.
set -euo pipefail
cd "$(dirname "$0")/.."

TAR=.cache/images/dataplane-standin.oci.tar
BUNDLE=.cache/dataplane-standin/bundle
RUNS=${RUNS:-5}

[ -f "$TAR" ] || hack/image-dataplane-standin.sh
layout=$(mktemp -d)
trap 'rm -rf "$layout"' EXIT
tar -C "$layout" -xf "$TAR"
rm -rf "$BUNDLE"
umoci unpack --image "$layout:dev" "$BUNDLE" >/dev/null
echo "bench-dataplane: stand-in image unpacked at $BUNDLE; $RUNS runs per process count"
STANDIN_BUNDLE=$PWD/$BUNDLE go test ./dataplane-image/test/dpdk -run '^$' -bench StandinTimeToReady \
  -benchtime "${RUNS}x" -count 1 -timeout 15m | grep -E 'Benchmark|ok|FAIL|---'
