#!/usr/bin/env bash
# Builds the real dataplane image from dataplane-image/Dockerfile with buildah, as a user's
# `docker build -f dataplane-image/Dockerfile .` would (`make run DATAPLANE=real` calls it; root).
# F-Stack's source is fetched inside the build by commit id (dataplane-image/build/build-fstack.sh),
# so it must be reachable from this machine: checked first, with a message when it is not. The
# Dockerfile's base images come from the debootstrap rootfs hack/lib/image.sh already makes
# (localhost/debian:bookworm and :bookworm-slim, which FROM debian:... finds with --pull=never),
# the Go stage from the local Go builder with the host's module and build caches. RUN steps need
# the network (apt-get, git): --isolation=chroot, as this host's hybrid cgroups require.
# Cached: rebuilt only when an input changed (the Dockerfile, the build script, the patches, the
# probe agent, the Go sources); the first build takes about 30 min on 2 cores.
#   output: .cache/images/dataplane.oci.tar, localhost/kube-fstack/dataplane:dev
# IMAGE_REF and IMAGE_OUT name another image and archive (make release: the version's tag).
# IMAGE_TARGET builds another of the Dockerfile's targets: fstack-nginx (F-Stack's Nginx, HTTP/3
# unless NGINX_HTTP3=off) or fstack-examples (F-Stack's example programs), each the dataplane
# image plus the application, with its own default ref and archive.
#   hack/image-dataplane.sh --source-reachable   only checks that F-Stack's source can be fetched
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib/image.sh
source hack/lib/image.sh

TARGET=${IMAGE_TARGET:-dataplane}
case $TARGET in
  dataplane | fstack-nginx | fstack-examples) ;;
  *) image_die "IMAGE_TARGET=$TARGET: want dataplane, fstack-nginx or fstack-examples (the targets of dataplane-image/Dockerfile)" ;;
esac
REF=${IMAGE_REF:-localhost/kube-fstack/$TARGET:dev}
OUT=${IMAGE_OUT:-$PWD/.cache/images/$TARGET.oci.tar}
NGINX_HTTP3=${NGINX_HTTP3:-on}
DF=dataplane-image/Dockerfile
# The repository the build fetches from: build-fstack.sh's default (the Dockerfile does not change it).
# shellcheck disable=SC2016 # a sed pattern, not an expansion
FSTACK_REPO="$(sed -n 's/^FSTACK_REPO=\${FSTACK_REPO:-\(.*\)}$/\1/p' dataplane-image/build/build-fstack.sh)"

# fstack_reachable: fail at once, not 10 minutes into the build, when the source cannot be fetched.
fstack_reachable() {
  [ -n "$FSTACK_REPO" ] || image_die "no FSTACK_REPO default in dataplane-image/build/build-fstack.sh"
  command -v git >/dev/null || image_die "git not found: hack/install-deps.sh installs it"
  if ! timeout 60 git ls-remote --exit-code "$FSTACK_REPO" HEAD >/dev/null 2>&1; then
    image_die "F-Stack's source ($FSTACK_REPO) cannot be reached from this machine, and the real dataplane image is built from it (dataplane-image/Dockerfile fetches it by commit id). Run where it can be fetched, or use the stand-in: make run (DATAPLANE=standin)"
  fi
}

# debian_bases: the Dockerfile's FROM images from the minbase rootfs, made once.
debian_bases() {
  local tag
  for tag in bookworm bookworm-slim; do
    buildah inspect --type image "localhost/debian:$tag" >/dev/null 2>&1 && continue
    debootstrap_base
    image_log "making localhost/debian:$tag (the minbase rootfs) for the Dockerfile's FROM debian:$tag"
    pack --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin - "localhost/debian:$tag" /bin/bash "$IMAGE_BASE_ROOTFS"
  done
}

dataplane_inputs() {
  git ls-files -z -co --exclude-standard -- '*.go' go.mod go.sum .dockerignore LICENSE NOTICE "$DF" dataplane-image hack/lib/image.sh "$0" \
    | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

main() {
  need_buildah
  local builder key old t0=$SECONDS
  # Before anything costs time: a first build cannot succeed without the source.
  [ -f "$OUT" ] || fstack_reachable
  builder="$(go_builder_image)"
  key="$(dataplane_inputs)-$(buildah images -q --noheading "$builder")-$TARGET-http3=$NGINX_HTTP3"
  if [ -f "$OUT" ] && [ "$(cat "$OUT.key" 2>/dev/null)" = "$key" ]; then
    image_log "$REF: $OUT is up to date"; return 0
  fi
  [ ! -f "$OUT" ] || fstack_reachable
  debian_bases
  go mod download || image_die "go mod download failed: the module cache the build mounts is incomplete"
  image_log "$REF: buildah bud -f $DF (F-Stack from $FSTACK_REPO; about 30 min the first time, log $OUT.log)"
  old="$(buildah images -q --noheading "$REF" 2>/dev/null || true)"
  mkdir -p "$(dirname "$OUT")"
  # The last stage is fstack-examples: every build names its target.
  buildah bud --pull=never --isolation=chroot --layers -f "$DF" --target "$TARGET" -t "$REF" --build-arg GO_IMAGE="$builder" \
    --build-arg NGINX_HTTP3="$NGINX_HTTP3" \
    -v "$(go env GOMODCACHE):/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build" . >"$OUT.log" 2>&1 \
    || image_die "buildah bud -f $DF failed; the step that failed is at the end of $OUT.log"
  drop_replaced "$old" "$REF"
  export_image "$REF" "$OUT"
  echo "$key" >"$OUT.key"
  image_log "$REF: $OUT ($(du -h "$OUT" | cut -f1)) in $((SECONDS - t0))s"
}

if [ "${1:-}" = --source-reachable ]; then fstack_reachable; exit 0; fi
main "$@"
