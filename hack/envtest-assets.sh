#!/usr/bin/env bash
# Prepares the folder KUBEBUILDER_ASSETS names for envtest: kube-apiserver built from source at a
# pinned version (hack/k8s-binaries.sh) and Debian's etcd. envtest's own downloader cannot reach
# its servers from our machines. Prints the folder; a second run only prints it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${K8S_VERSION:-v1.35.4}"
ASSETS="$ROOT/.cache/envtest/k8s-$VERSION"
if [ ! -x "$ASSETS/kube-apiserver" ] || [ ! -x "$ASSETS/etcd" ]; then
  mkdir -p "$ASSETS"
  if ! command -v etcd >/dev/null; then
    echo "envtest-assets: etcd not found; install Debian's etcd-server (hack/install-deps.sh does)" >&2
    exit 1
  fi
  "$ROOT/hack/k8s-binaries.sh" -v "$VERSION" kube-apiserver >&2
  ln -sf "$ROOT/.cache/k8s/$VERSION/kube-apiserver" "$ASSETS/kube-apiserver"
  ln -sf "$(command -v etcd)" "$ASSETS/etcd"
fi
echo "$ASSETS"
