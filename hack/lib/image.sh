# shellcheck shell=bash
# What every image script shares (sourced, not run): one way to pack directory trees into an image
# (pack), the local Go builder image, and one way to build the repository's Dockerfiles
# (build_image). All of it is buildah: no daemon, and with --pull=never no registry; RUN steps have
# no network. Images are kept in buildah's store as localhost/... and exported as OCI archives,
# whose ref name is the tag, so `ctr -n k8s.io images import --base-name NAME OUT` and umoci read
# them. Needs root (buildah mounts the image's rootfs).

IMAGE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The debootstrap minbase rootfs the local cluster's nginx and the Go builder start from.
IMAGE_BASE_ROOTFS="$IMAGE_ROOT/.cache/cluster/cache/rootfs/base"

image_log() { printf '%s image: %s\n' "$(date +%T)" "$*" >&2; }
image_die() { printf 'image: ERROR: %s\n' "$*" >&2; exit 1; }

need_buildah() {
  command -v buildah >/dev/null || image_die "buildah not found: hack/install-deps.sh installs it (apt-get install buildah)"
  [ "$(id -u)" = 0 ] || image_die "building images needs root (buildah mounts the image's rootfs)"
}

# The machine's own Debian mirror, so nothing here names one.
debian_mirror() {
  local m
  m=$(grep -hoE '^(URIs:|deb) +[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -E '/debian/?$' | head -1)
  [ -n "$m" ] || image_die "no Debian mirror in /etc/apt/sources.list*"
  echo "$m"
}

# debootstrap_base: the minbase rootfs at IMAGE_BASE_ROOTFS, made once (1-2 min) and cached.
debootstrap_base() {
  [ -f "$IMAGE_BASE_ROOTFS/.complete" ] && return 0
  command -v debootstrap >/dev/null || image_die "debootstrap not found: hack/install-deps.sh installs it"
  image_log "rootfs: debootstrap bookworm minbase (1-2 min, cached in $IMAGE_BASE_ROOTFS)"
  rm -rf "$IMAGE_BASE_ROOTFS" && mkdir -p "$IMAGE_BASE_ROOTFS"
  debootstrap --variant=minbase bookworm "$IMAGE_BASE_ROOTFS" "$(debian_mirror)" >"$IMAGE_BASE_ROOTFS.log" 2>&1 \
    || image_die "debootstrap failed, see $IMAGE_BASE_ROOTFS.log"
  touch "$IMAGE_BASE_ROOTFS/.complete"
}

# json_array ARG...: a JSON array of strings, as buildah config takes an exec-form entrypoint.
json_array() {
  local a out="" sep=""
  for a in "$@"; do
    a="${a//\\/\\\\}"; a="${a//\"/\\\"}"
    out+="$sep\"$a\""; sep=","
  done
  printf '[%s]' "$out"
}

# export_image REF OUT: REF from buildah's store to the OCI archive OUT, ref name = REF's tag.
export_image() {
  local ref="$1" out="$2" tmp="$2.$$.tmp"
  mkdir -p "$(dirname "$out")"
  rm -f "$tmp"
  buildah push -q "$ref" "oci-archive:$tmp:${ref##*:}" >/dev/null || { rm -f "$tmp"; image_die "buildah push $ref to $out failed"; }
  mv "$tmp" "$out"
}

# drop_replaced OLD_ID REF: remove the image REF pointed to before a rebuild, now untagged.
drop_replaced() {
  local new
  new="$(buildah images -q --noheading "$2" 2>/dev/null || true)"
  if [ -n "$1" ] && [ "$1" != "$new" ]; then buildah rmi "$1" >/dev/null 2>&1 || true; fi
}

# pack [--label K=V|--env K=V|--user U|--entry-arg A]... OUT REF ENTRYPOINT SRC[:DEST]... [-- CMD...]
# One image layer from directories copied in order (SRC's contents into DEST, default /), with
# ENTRYPOINT (and its --entry-arg arguments, which a pod's args do not replace) and CMD; tagged
# REF in buildah's store and, unless OUT is -, exported to OUT.
pack() {
  local cfg=() entry_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --label|--env|--user) cfg+=("$1" "$2"); shift 2 ;;
      --entry-arg) entry_args+=("$2"); shift 2 ;;
      *) break ;;
    esac
  done
  local out="$1" ref="$2" entry="$3" srcs=() cmd=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do srcs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  cmd=("$@")
  [ ${#cmd[@]} -gt 0 ] && cfg+=(--cmd "$(json_array "${cmd[@]}")")
  need_buildah
  local ctr old
  old="$(buildah images -q --noheading "$ref" 2>/dev/null || true)"
  ctr="$(buildah from --pull=never scratch)" || image_die "buildah from scratch failed"
  if ! pack_into "$ctr" "${srcs[@]}" || ! buildah config "${cfg[@]}" --entrypoint "$(json_array "$entry" "${entry_args[@]}")" "$ctr" \
      || ! buildah commit -q --rm "$ctr" "$ref" >/dev/null; then
    buildah rm "$ctr" >/dev/null 2>&1 || true
    image_die "packing $ref failed"
  fi
  drop_replaced "$old" "$ref"
  if [ "$out" != - ]; then export_image "$ref" "$out"; fi
}

# pack_into CTR SRC[:DEST]...: copy each tree into the container's mounted rootfs (cp -a keeps
# owners, modes, links and device nodes, as a rootfs needs).
pack_into() {
  local ctr="$1" mnt src dest rc=0
  shift
  mnt="$(buildah mount "$ctr")" || return 1
  for src in "$@"; do
    dest=/
    case "$src" in *:*) dest="${src#*:}"; src="${src%%:*}" ;; esac
    { mkdir -p "$mnt$dest" && cp -a "$src/." "$mnt$dest/"; } || { rc=1; break; }
  done
  rm -f "$mnt/.complete"
  buildah umount "$ctr" >/dev/null || rc=1
  return $rc
}

# go_builder_image: prints the local Go builder's name, making it first if needed: the minbase
# rootfs plus this machine's Go (so the image builds exactly what `make build` builds), tagged
# with the Go version. GOTOOLCHAIN=local: a missing toolchain fails instead of downloading.
go_builder_image() {
  local gover goroot ref
  command -v go >/dev/null || image_die "go not found (expected at /usr/local/go/bin)"
  gover="$(go env GOVERSION)"
  goroot="$(go env GOROOT)"
  ref="localhost/kube-fstack/go-builder:$gover"
  if ! buildah inspect --type image "$ref" >/dev/null 2>&1; then
    debootstrap_base
    image_log "making $ref (the minbase rootfs + $goroot)"
    pack --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env GOPATH=/go --env GOMODCACHE=/go/pkg/mod --env GOCACHE=/root/.cache/go-build --env GOTOOLCHAIN=local \
      - "$ref" /bin/sh "$IMAGE_BASE_ROOTFS" "$goroot:/usr/local/go"
  fi
  echo "$ref"
}

# image_inputs DOCKERFILE: the hash of everything a Go image's build reads: the Dockerfile, the
# Go sources and modules, and this file (its build flags). Docs and charts do not rebuild images.
image_inputs() {
  (cd "$IMAGE_ROOT" && git ls-files -z -co --exclude-standard -- '*.go' go.mod go.sum .dockerignore LICENSE NOTICE "$1" hack/lib/image.sh \
    | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# build_image OUT REF DOCKERFILE [PLATFORM]: builds the repository's DOCKERFILE (context: the
# repository root) exactly as a user would, on the local Go builder with the host's module cache
# (GOPROXY=off: nothing is downloaded) and build cache mounted, and exports it to OUT. Skipped when
# OUT was built from the same inputs (OUT.key), so a warm run costs a hash. PLATFORM (linux/arm64)
# builds for another architecture: the Dockerfiles cross-compile on the build machine's builder
# (FROM --platform=$BUILDPLATFORM) onto scratch, so it needs no emulator and no foreign image.
# BUILDPLATFORM, TARGETOS and TARGETARCH are passed because buildah 1.28 (Debian 12's) does not
# always set them as BuildKit does.
build_image() {
  local out="$1" ref="$2" df="$3" platform="${4:-}" builder key old t0=$SECONDS plat=()
  need_buildah
  builder="$(go_builder_image)"
  key="$(image_inputs "$df")-$(buildah images -q --noheading "$builder")${platform:+-$platform}"
  [ -z "$platform" ] || plat=(--platform "$platform")
  platform=${platform:-linux/$(go env GOHOSTARCH)}
  if [ -f "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
    image_log "$ref: $out is up to date"; return 0
  fi
  # The Dockerfiles run `go mod download`, which wants every module go.sum names, more than the
  # host's builds and tests ever fetched: fetch them on the host first (a no-op when cached), so a
  # bare machine's first build does not fail inside the network-less build.
  (cd "$IMAGE_ROOT" && go mod download) || image_die "go mod download failed: the module cache the image build mounts is incomplete"
  image_log "$ref: buildah bud -f $df (builder $builder, no network)"
  old="$(buildah images -q --noheading "$ref" 2>/dev/null || true)"
  buildah bud -q --pull=never --network=none "${plat[@]}" -f "$IMAGE_ROOT/$df" -t "$ref" \
    --build-arg GO_IMAGE="$builder" --build-arg GOPROXY=off --build-arg GOFLAGS=-mod=readonly \
    --build-arg BUILDPLATFORM="linux/$(go env GOHOSTARCH)" \
    --build-arg TARGETOS=linux --build-arg TARGETARCH="${platform#linux/}" \
    -v "$(go env GOMODCACHE):/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build" "$IMAGE_ROOT" >/dev/null \
    || image_die "buildah bud -f $df failed (GOPROXY=off: a module missing from $(go env GOMODCACHE) needs 'go mod download' on the host)"
  drop_replaced "$old" "$ref"
  export_image "$ref" "$out"
  echo "$key" >"$out.key"
  image_log "$ref: $out ($(du -h "$out" | cut -f1)) in $((SECONDS - t0))s"
}
