#!/usr/bin/env bash
# Installs what the test tiers need on a bare Debian 12 machine. Idempotent: each step checks
# first, so a second run costs seconds. Go tools are installed by the Makefile into ./bin.
#   hack/install-deps.sh            what `make test` needs
#   hack/install-deps.sh --cluster  that, plus the local cluster's packages (make cluster-up)
# TOOLS names the Makefile target that installs the pinned Go tools: `tools` (default) every
# one; `make run` asks for `tools-run`, helm alone, since it lints nothing and releases nothing
# (cosign and syft, built from source, were most of a cold first run's first step).
set -euo pipefail
# shellcheck source=hack/lib/apt.sh
source "$(dirname "$0")/lib/apt.sh"

APT_PACKAGES=(
  git make gcc patch
  # make lint: shellcheck of every shell script (the image build script's tests need patch, above).
  shellcheck
  # Operator envtest (make test-envtest): etcd beside the kube-apiserver built from source.
  etcd-server
  # CNI node tests (make test-node): OVS-DPDK, DPDK testpmd and its virtio and pcap PMDs (the
  # TCP checksum test captures what reaches the pod), netns tools, and ethtool, with which
  # hack/lib/kernel-sender.sh turns tx checksum offload off on kernel senders (the local
  # cluster's node address and every test peer).
  openvswitch-switch-dpdk dpdk-dev librte-net-virtio23 librte-mempool-ring23 librte-net-pcap23 iproute2 iputils-ping util-linux ethtool
  # The node tier's forged-frame test captures what a pod's port lets through.
  tcpdump
  # Dataplane tests and the stand-in image (make test-dataplane, make image-dataplane-standin);
  # buildah builds every image (the Dockerfiles of make image-operator/image-cni, and the packed
  # ones) with no daemon or registry; umoci unpacks the stand-in for make bench-dataplane.
  librte-net-null23 debootstrap buildah umoci
  # The stand-in shim links libnuma and libatomic as F-Stack's does, and carries them as the real
  # image does (dataplane-image/build/package.sh: patchelf sets its run path).
  libnuma-dev patchelf
  # make test-chart: promtool checks the chart's alerts and runs their unit tests.
  prometheus
  # make bench-datapath's helper (hack/lib/bench_datapath.py), tested in test/hack.
  python3
)

# The local single-node cluster (hack/cluster/up.sh): container runtime, kube-proxy's and
# the bridge plugin's netfilter tools, PKI and the pause image's static build. Only with
# --cluster. (The Prometheus the e2e suite runs against the cluster, its own instance on
# 127.0.0.1, is the prometheus package above.)
CLUSTER_PACKAGES=(
  containerd runc iptables conntrack socat openssl curl libc6-dev
  # make bench-datapath: the HTTP load generator on the node.
  wrk
  # The multi-node kind cluster (hack/kind/up.sh, make test-multinode): kind's podman provider,
  # with netavark and aardvark-dns so that the nodes find each other by name.
  podman netavark aardvark-dns
)
if [ "${1:-}" = "--cluster" ]; then
  APT_PACKAGES+=("${CLUSTER_PACKAGES[@]}")
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  # Both wait for another apt (apt-daily on a fresh VM) instead of failing (hack/lib/apt.sh).
  apt_get update -qq
  DEBIAN_FRONTEND=noninteractive apt_get install -y -qq --no-install-recommends "${missing[@]}"
  # Where systemd runs, the package starts Prometheus on every interface (:9090); the e2e suite
  # starts its own on 127.0.0.1, so the one just installed is stopped.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service || true
  fi
fi

command -v go >/dev/null || { echo "install-deps: Go is required (expected at /usr/local/go/bin)"; exit 1; }
make -s "${TOOLS:-tools}"
