#!/usr/bin/env bash
# Builds the operator image from the repository's Dockerfile with buildah: no daemon, no registry,
# no network (hack/lib/image.sh, build_image). Root. Rebuilt only when a Go source changed.
#   output: .cache/images/operator.oci.tar, to import as localhost/kube-fstack/operator:dev
#   (ctr -n k8s.io images import --base-name localhost/kube-fstack/operator .cache/images/operator.oci.tar)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
# shellcheck source=hack/lib/image.sh
source hack/lib/image.sh

build_image "$PWD/.cache/images/operator.oci.tar" localhost/kube-fstack/operator:dev Dockerfile
