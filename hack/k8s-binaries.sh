#!/usr/bin/env bash
# Builds Kubernetes binaries from source through the Go module proxy, cached by version.
#
#   hack/k8s-binaries.sh [-v VERSION] [-o DIR] BINARY...   e.g. kube-apiserver kubelet kubectl
#
# k8s.io/kubernetes replaces every staging module with a local path, so it cannot be built with
# `go install`. A throwaway wrapper module requires it and points each staging module at its
# published v0.<minor>.<patch> twin instead. Version ldflags make the binaries report the real
# version (not v0.0.0-master), which the API server's discovery and kubelet checks rely on.
# A binary already in DIR is not rebuilt, so the second run costs nothing.
set -euo pipefail
# shellcheck source=hack/lib/progress.sh
source "$(dirname "$0")/lib/progress.sh"

VERSION="${K8S_VERSION:-v1.35.4}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT=""
while getopts "v:o:" opt; do
  case "$opt" in
    v) VERSION="$OPTARG" ;;
    o) OUT="$OPTARG" ;;
    *) echo "usage: $0 [-v VERSION] [-o DIR] BINARY..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-v VERSION] [-o DIR] BINARY..." >&2; exit 2; }
OUT="${OUT:-$ROOT/.cache/k8s/$VERSION}"
mkdir -p "$OUT"

missing=()
for b in "$@"; do
  [ -x "$OUT/$b" ] || missing+=("$b")
done
[ ${#missing[@]} -eq 0 ] && exit 0

export PATH="/usr/local/go/bin:$PATH"
STAGING_VERSION="v0.${VERSION#v1.}"
WRAP="$ROOT/.cache/k8s/wrapper-$VERSION"
mkdir -p "$WRAP"
# The wrapper imports the library side of every binary this script builds, so `go mod tidy`
# records go.sum entries for all of them; a wrapper written by an older version of this
# script (kube-apiserver only) is regenerated when the import list differs.
WRAPPER_GO="package wrapper

import (
	_ \"k8s.io/kubectl/pkg/cmd\"
	_ \"k8s.io/kubernetes/cmd/kube-apiserver/app\"
	_ \"k8s.io/kubernetes/cmd/kube-controller-manager/app\"
	_ \"k8s.io/kubernetes/cmd/kube-proxy/app\"
	_ \"k8s.io/kubernetes/cmd/kube-scheduler/app\"
	_ \"k8s.io/kubernetes/cmd/kubeadm/app\"
	_ \"k8s.io/kubernetes/cmd/kubelet/app\"
)"
if [ -f "$WRAP/go.sum" ] && [ "$(cat "$WRAP/wrapper.go" 2>/dev/null)" != "$WRAPPER_GO" ]; then
  rm -f "$WRAP/go.sum"
fi
if [ ! -f "$WRAP/go.sum" ]; then
  echo "k8s-binaries: resolving k8s.io/kubernetes@$VERSION (staging modules at $STAGING_VERSION)"
  GOMOD="$(cd "$WRAP" && go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  {
    echo "module kube-fstack.local/k8s-wrapper"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$GOMOD"
    echo ")"
  } >"$WRAP/go.mod"
  printf '%s\n' "$WRAPPER_GO" >"$WRAP/wrapper.go"
  tidy() { (cd "$WRAP" && go mod tidy >/dev/null); }
  with_progress "resolving the modules of k8s.io/kubernetes@$VERSION (k8s-binaries)" tidy
fi

MAJOR="${VERSION#v}"; MAJOR="${MAJOR%%.*}"
MINOR="${VERSION#v*.}"; MINOR="${MINOR%%.*}"
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=$MAJOR -X $pkg.gitMinor=$MINOR"
  LDFLAGS+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
  LDFLAGS+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
pkgs=()
for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
echo "k8s-binaries: building ${missing[*]} $VERSION into $OUT (minutes with an empty Go build cache: the local cluster's six took 11 min on 2 CPUs)"
start=$(date +%s)
build() { (cd "$WRAP" && go build -trimpath -ldflags "$LDFLAGS" -o "$OUT/" "${pkgs[@]}"); }
with_progress "building ${missing[*]} $VERSION from source (k8s-binaries)" build
echo "k8s-binaries: built in $(( $(date +%s) - start ))s"
