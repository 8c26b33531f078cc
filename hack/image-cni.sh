#!/usr/bin/env bash
# Builds the CNI installer image as an OCI tarball without a registry or a container daemon
# (umoci, as hack/cluster/images.sh packs the operator): static builds of fstack-cni and
# fstack-cni-installer on an otherwise empty image; the entrypoint is the installer, which copies
# /usr/local/bin/fstack-cni into the node's CNI bin dir (the chart's DaemonSet runs it).
#   output: .cache/images/cni.tar, to import as localhost/kube-fstack/cni:dev
#   (ctr -n k8s.io images import --base-name localhost/kube-fstack/cni .cache/images/cni.tar)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/cluster/lib.sh
source hack/cluster/lib.sh

TAG=dev
OUT=$PWD/.cache/images/cni.tar
command -v umoci >/dev/null || { echo "image-cni: umoci not found (apt-get install umoci)" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
work="$(mktemp -d "$PWD/.cache/image-cni.XXXXXX")"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/root/usr/local/bin"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/root/usr/local/bin/" \
  ./cni/cmd/fstack-cni ./cni/cmd/fstack-cni-installer

# Same binaries as the tarball already holds: nothing to do (a new tarball means a re-import and
# a DaemonSet restart on the local cluster).
sum="$(cat "$work/root/usr/local/bin/"* | sha256sum | cut -c1-16)"
if [ -f "$OUT" ] && [ "$(cat "${OUT%.tar}.sum" 2>/dev/null)" = "$sum" ]; then
  echo "image-cni: $OUT is up to date"; exit 0
fi

pack "$OUT" "$TAG" /usr/local/bin/fstack-cni-installer "$work/root"
echo "$sum" >"${OUT%.tar}.sum"
echo "image-cni: $OUT (import as localhost/kube-fstack/cni:$TAG)"
