#!/usr/bin/env bash
# Benchmarks fstack-cni on a private OVS-DPDK instance (root; hack/install-deps.sh installs the
# prerequisites): ADD+DEL p50/p99 against the reference bridge plugin and against the exec
# baseline, interleaved in one run (a new shuffled order each round), then a fault run that must
# leak nothing.
#
# The exec baseline is cni/test/bench/vsctl-cni: a plugin binary the runtime execs for ADD and
# for DEL, like fstack-cni, that makes the same directory, device info and port (same
# external_ids) by exec'ing ovs-vsctl, as userspace-cni does. The goal ratio compares it run
# with --no-wait, so neither side waits for ovs-vswitchd; the waiting run (userspace-cni's
# default) and two bare ovs-vsctl runs without any plugin process are printed beside it.
# Every plugin is built static (CGO_ENABLED=0), as the CNI project ships its own.
# BENCH_CNI_BASE="<git revision or source dir> ..." also builds fstack-cni from each and measures
# it in the same run (three more series each, and this build / it by wall and CPU time): the
# A/B of a change.
# Usage: [BENCH_CNI_BASE="<rev|dir> ..."] hack/bench-cni.sh [-n 100] [-cycles 1000]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export CGO_ENABLED=0

work=$(mktemp -d /tmp/fsk-bench.XXXXXX)
ns="fsk-bench-host-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

echo "bench-cni: building fstack-cni and the vsctl-cni baseline, and installing the reference bridge and host-local plugins"
# Every fstack-cni build reads the bench's node config, never the machine's /etc/kube-fstack/cni.json
# (a build from before the node config ignores the flag and takes the network config's paths).
nodeconf="$work/etc-kube-fstack/cni.json"
ldflags="-X github.com/kube-fstack/kube-fstack/cni/internal/plugin.nodeConfigPath=$nodeconf"
go build -ldflags "$ldflags" -o "$work/build/" ./cni/cmd/fstack-cni ./cni/test/bench/vsctl-cni
GOBIN="$work/build" go install github.com/containernetworking/plugins/plugins/main/bridge@v1.9.1 \
  github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1
go build -o "$work/bench" ./cni/test/bench
# Every plugin reaches the bin dir as on a node: copied there (fstack-cni-installer copies, so do
# packages). A binary the Go linker wrote in place through a memory mapping starts about 7%
# slower (more page-cache work at exec) than the same bytes written by a copy, and which of the
# two a plugin got would otherwise depend on how it was built.
mkdir -p "$work/bin"
cp "$work/build/fstack-cni" "$work/build/vsctl-cni" "$work/build/bridge" "$work/build/host-local" "$work/bin/"

# The bridge plugin makes a Linux bridge in the "host" namespace: give it one of its own.
ip netns add "$ns"
ip -n "$ns" link set lo up
base=()
for rev in ${BENCH_CNI_BASE:-}; do
  label=$(basename "$rev")
  echo "bench-cni: building fstack-cni at $rev as base build $label"
  src="$work/base-src/$label"
  mkdir -p "$src" "$work/base-bin/$label"
  if [[ -d "$rev" ]]; then cp -a "$rev/." "$src/"; else git archive "$rev" | tar -x -C "$src"; fi
  (cd "$src" && go build -ldflags "$ldflags" -o "$work/base-build/$label/" ./cni/cmd/fstack-cni)
  cp "$work/base-build/$label/fstack-cni" "$work/build/host-local" "$work/base-bin/$label/"
  base+=(-base "$label=$work/base-bin/$label")
done

ip netns exec "$ns" "$work/bench" -bin "$work/bin" -node-config "$nodeconf" "${base[@]}" "$@"
