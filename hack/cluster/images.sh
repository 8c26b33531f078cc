#!/usr/bin/env bash
# Builds the local cluster's images as OCI archives without a registry or a daemon (buildah, through
# hack/lib/image.sh), cached under .cache; `import` loads them into containerd's k8s.io namespace.
# The operator and the CNI installer come from the repository's Dockerfiles, as users build them.
#   hack/cluster/images.sh build    pause, nginx, operator, CNI installer, dataplane stand-in (cached)
#   hack/cluster/images.sh import   ctr import of every tarball (containerd must run)
# Names are localhost/NAME:TAG: a bare name would mean docker.io/library/NAME, which cannot be pulled.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=hack/lib/image.sh
source "$ROOT/hack/lib/image.sh"
# shellcheck source=hack/lib/progress.sh
source "$ROOT/hack/lib/progress.sh"

IMAGES="$CACHE/images"
BASE="$IMAGE_BASE_ROOTFS"
STANDIN_TAR="$ROOT/.cache/images/dataplane-standin.oci.tar"
OPERATOR_TAR="$ROOT/.cache/images/operator.oci.tar"
CNI_TAR="$ROOT/.cache/images/cni.oci.tar"

# The pause container only has to hold the sandbox's namespaces: sleep until told to stop, and
# reap children so a shared PID namespace never fills with zombies.
build_pause() {
  [ -f "$IMAGES/pause.oci.tar" ] && return 0
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
  pack "$IMAGES/pause.oci.tar" localhost/pause:3.10 /pause "$d/root"
  rm -rf "$d"
}

# nginx from Debian, in a copy of the base rootfs, serving its default page on port 80.
build_nginx() {
  [ -f "$IMAGES/nginx.oci.tar" ] && return 0
  debootstrap_base
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
  pack "$IMAGES/nginx.oci.tar" localhost/nginx:1.22 /usr/sbin/nginx "$r" -- -g "daemon off;"
  rm -rf "$r"
}

# The operator and the CNI installer: the repository's Dockerfiles, rebuilt when a Go source changed.
build_operator() {
  "$ROOT/hack/image-operator.sh"
}

build_cni() {
  "$ROOT/hack/image-cni.sh"
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
    name="${pair#*:}"
    case "${pair%%:*}" in
      standin) tar="$STANDIN_TAR" ;;
      operator) tar="$OPERATOR_TAR" ;;
      cni) tar="$CNI_TAR" ;;
      *) tar="$IMAGES/${pair%%:*}.oci.tar" ;;
    esac
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
  # Each is cached; a cold one takes minutes with no output of its own, hence the progress lines.
  build)
    with_progress "building image localhost/pause" build_pause
    with_progress "building image localhost/nginx (debootstrap, apt)" build_nginx
    with_progress "building image localhost/kube-fstack/operator" build_operator
    with_progress "building image localhost/kube-fstack/cni" build_cni
    with_progress "building image localhost/kube-fstack/dataplane-standin" build_standin ;;
  import) import_all ;;
  *) die "usage: $0 build|import" ;;
esac
