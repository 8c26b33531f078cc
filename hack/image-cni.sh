#!/usr/bin/env bash
# Builds the CNI installer image from cni/Dockerfile with buildah: no daemon, no registry, no
# network (hack/lib/image.sh, build_image). Root. Rebuilt only when a Go source changed. The
# entrypoint is the installer, which copies /usr/local/bin/fstack-cni into the node's CNI bin dir
# (the chart's DaemonSet runs it).
#   output: .cache/images/cni.oci.tar, to import as localhost/kube-fstack/cni:dev
#   (ctr -n k8s.io images import --base-name localhost/kube-fstack/cni .cache/images/cni.oci.tar)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
# shellcheck source=hack/lib/image.sh
source hack/lib/image.sh

build_image "$PWD/.cache/images/cni.oci.tar" localhost/kube-fstack/cni:dev cni/Dockerfile
