#!/usr/bin/env bash
# Builds the local cluster's images as OCI tarballs without a registry or a daemon (umoci), cached
# under .cache/cluster/cache/images; `import` loads them into containerd's k8s.io namespace.
#   hack/cluster/images.sh build    pause, nginx, operator, CNI installer, dataplane stand-in (cached)
#   hack/cluster/images.sh import   ctr import of every tarball (containerd must run)
# Names are localhost/NAME:TAG: a bare name would mean docker.io/library/NAME, which cannot be pulled.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

IMAGES="$CACHE/images"
BASE="$CACHE/rootfs/base"
STANDIN_TAR="$ROOT/.cache/images/dataplane-standin.tar"
CNI_TAR="$ROOT/.cache/images/cni.tar"

# The pause container only has to hold the sandbox's namespaces: sleep until told to stop, and
# reap children so a shared PID namespace never fills with zombies.
build_pause() {
  [ -f "$IMAGES/pause.tar" ] && return 0
  log "image: localhost/pause:3.10 (static C)"
  local d; d="$(mktemp -d "$CACHE/pause.XXXXXX")"
  cat >"$d/pause.c" <<'EOF'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
	signal(SIGINT, stop); signal(SIGTERM, stop); signal(SIGCHLD, reap);
	for (;;) pause();
}
EOF
  mkdir -p "$d/root"
  gcc -static -Os -s -o "$d/root/pause" "$d/pause.c" || die "gcc -static failed: install libc6-dev (hack/install-deps.sh --cluster)"
  pack "$IMAGES/pause.tar" 3.10 /pause "$d/root"
  rm -rf "$d"
}

mirror() {
  local m
  m=$(grep -hoE '^(URIs:|deb) +[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -E '/debian/?$' | head -1)
  [ -n "$m" ] || die "no Debian mirror in /etc/apt/sources.list*"
  echo "$m"
}

build_base() {
  [ -f "$BASE/.complete" ] && return 0
  log "rootfs: debootstrap bookworm minbase (1-2 min, cached in $BASE)"
  rm -rf "$BASE" && mkdir -p "$BASE"
  debootstrap --variant=minbase bookworm "$BASE" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 \
    || die "debootstrap failed, see $CACHE/debootstrap.log"
  touch "$BASE/.complete"
}

# nginx from Debian, in a copy of the base rootfs, serving its default page on port 80.
build_nginx() {
  [ -f "$IMAGES/nginx.tar" ] && return 0
  build_base
  log "image: localhost/nginx:1.22 (Debian nginx in a chroot)"
  local r="$CACHE/rootfs/nginx"
  rm -rf "$r" && cp -a "$BASE" "$r"
  mount -t proc proc "$r/proc"
  trap 'umount "$r/proc" 2>/dev/null || true' EXIT
  chroot "$r" apt-get -o DPkg::Lock::Timeout=600 update -qq >"$CACHE/nginx-apt.log" 2>&1
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -qq \
    --no-install-recommends install nginx-light >>"$CACHE/nginx-apt.log" 2>&1 \
    || die "apt-get install nginx in the rootfs failed, see $CACHE/nginx-apt.log"
  chroot "$r" apt-get clean
  umount "$r/proc"; trap - EXIT
  rm -rf "$r"/usr/share/{doc,man,info,locale} "$r"/var/lib/apt/lists/* "$r/.complete"
  ln -sf /dev/stdout "$r/var/log/nginx/access.log"
  ln -sf /dev/stderr "$r/var/log/nginx/error.log"
  pack "$IMAGES/nginx.tar" 1.22 /usr/sbin/nginx "$r" -- -g "daemon off;"
  rm -rf "$r"
}

# The operator is pure Go: a static binary on an otherwise empty image. Rebuilt when the
# binary changes, so the image always matches the tree.
build_operator() {
  local d; d="$(mktemp -d "$CACHE/operator.XXXXXX")"
  mkdir -p "$d/root/etc"
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$d/root/fstack-operator" ./operator/cmd/fstack-operator)
  echo "nonroot:x:65532:65532::/:/sbin/nologin" >"$d/root/etc/passwd"
  local sum; sum="$(sha256sum "$d/root/fstack-operator" | cut -c1-16)"
  if [ -f "$IMAGES/operator.tar" ] && [ "$(cat "$IMAGES/operator.sum" 2>/dev/null)" = "$sum" ]; then
    rm -rf "$d"; return 0
  fi
  log "image: localhost/kube-fstack/operator:dev (static binary; buildah is not used)"
  pack "$IMAGES/operator.tar" dev /fstack-operator "$d/root"
  echo "$sum" >"$IMAGES/operator.sum"
  rm -rf "$d"
}

build_cni() {
  "$ROOT/hack/image-cni.sh" >/dev/null
}

# Repacked when the supervisor or launcher changed (the Debian rootfs under it is cached).
build_standin() {
  [ -f "$STANDIN_TAR" ] || log "image: dataplane stand-in (hack/image-dataplane-standin.sh, a few minutes)"
  "$ROOT/hack/image-dataplane-standin.sh" >"$CACHE/standin-build.log" 2>&1 \
    || die "hack/image-dataplane-standin.sh failed, see $CACHE/standin-build.log"
}

import_all() {
  local name tar
  for pair in pause:localhost/pause nginx:localhost/nginx operator:localhost/kube-fstack/operator \
      "standin:localhost/kube-fstack/dataplane-standin" cni:localhost/kube-fstack/cni; do
    name="${pair#*:}"; tar="$IMAGES/${pair%%:*}.tar"
    [ "${pair%%:*}" = standin ] && tar="$STANDIN_TAR"
    [ "${pair%%:*}" = cni ] && tar="$CNI_TAR"
    [ -f "$tar" ] || { log "image: $tar missing, not imported"; continue; }
    # Skip a tarball this containerd already imported (up.sh twice).
    if [ "$(cat "$RUN/imported-${pair%%:*}" 2>/dev/null)" = "$(stat -c %Y "$tar")" ]; then continue; fi
    ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --base-name "$name" "$tar" >/dev/null \
      || die "ctr import of $tar failed (containerd log: $LOGS/containerd.log)"
    stat -c %Y "$tar" >"$RUN/imported-${pair%%:*}"
    log "image: imported $name"
  done
}

mkdir -p "$IMAGES" "$CACHE/rootfs"
case "${1:-build}" in
  build) build_pause; build_nginx; build_operator; build_cni; build_standin ;;
  import) import_all ;;
  *) die "usage: $0 build|import" ;;
esac
