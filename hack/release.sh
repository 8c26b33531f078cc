#!/usr/bin/env bash
# A release a platform team can take (`make release VERSION=v0.1.0 COSIGN_KEY=cosign.key`), in OUT:
#   images/<name>.oci.tar        the images as OCI archives: operator and cni one index for every
#                                IMAGE_PLATFORMS (default linux/amd64 linux/arm64), dataplane
#                                linux/amd64 only (F-Stack and its DPDK are built for x86 here)
#   images/<name>.digest         the digest the chart names (of the index for operator and cni)
#   kube-fstack-<chart>.tgz      the chart, naming each image built by digest
#   kubectl-fstack_<v>_<os>_<arch>.tar.gz, fstack.yaml
#                                the plugin for linux/darwin x amd64/arm64 (with LICENSE, NOTICE and
#                                THIRD_PARTY_NOTICES) and its krew manifest (hack/krew-release.sh)
#   sbom/*.spdx.json             an SPDX SBOM per image and architecture and per plugin binary (syft)
#   signatures/<name>.payload.json, .sig
#                                each image's cosign signature of its digest (attached in the
#                                registry on push, so `cosign verify --key cosign.pub` works there)
#   SHA256SUMS, *.sig, cosign.pub
#                                the checksums of every file and a cosign signature of each file
# and, when a registry is given, pushes the images, their signatures and the chart. It ends by
# verifying every signature and checksum it wrote. Nothing is pushed without REGISTRY.
#   hack/release.sh all VERSION       everything above (root, buildah)
#   hack/release.sh chart VERSION     the chart alone, naming the images by tag (no root)
#   hack/release.sh verify VERSION    verify OUT's signatures and checksums again
# Environment:
#   IMAGE_REPO      where the images live, without the component: IMAGE_REPO/operator,
#                   IMAGE_REPO/cni, IMAGE_REPO/dataplane (default localhost/kube-fstack, this
#                   machine's buildah store). The packaged chart's defaults name these.
#   REGISTRY        an OCI registry for the chart, oci://HOST/PATH: `helm push` sends it there and
#                   the images are pushed to IMAGE_REPO. Empty: nothing is pushed.
#   RELEASE_IMAGES  the images to build (default "operator cni dataplane").
#   IMAGE_PLATFORMS the platforms of the operator and CNI images (default "linux/amd64 linux/arm64").
#   COSIGN_KEY      the releaser's cosign private key (cosign generate-key-pair makes one; its
#                   password in COSIGN_PASSWORD). Required by all and verify.
#   REGISTRY_PLAIN_HTTP=1  talk plain HTTP to the registry (a test registry on this machine only).
#   RELEASE_URL     where the plugin archives will be downloaded from, for the krew manifest
#                   (default the project's GitHub release of VERSION).
#   OUT             output directory (default _output/release/VERSION).
#   HELM, COSIGN, SYFT  the pinned tools (make tools installs them into bin/).
#   GO              the go command (default go), which runs hack/tools/yamlset.
# The chart's version is VERSION without the v, its appVersion VERSION (charts/kube-fstack/Chart.yaml
# says how they move). The real dataplane image is built from F-Stack's source
# (hack/image-dataplane.sh): where that cannot be fetched it is left out, said so, the chart names
# it by tag, and a push is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

die() { printf 'release: ERROR: %s\n' "$*" >&2; exit 1; }
say() { printf 'release: %s\n' "$*" >&2; }

usage() { die "usage: $0 all|chart|verify VERSION (VERSION like v0.1.0)"; }
[ $# -eq 2 ] || usage
MODE=$1 VERSION=$2
case "$MODE" in all|chart|verify) ;; *) usage ;; esac
# Semver with a leading v: helm needs the chart version as semver, and image tags take no '+'.
[[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] \
  || die "VERSION=$VERSION: want v<major>.<minor>.<patch>[-<pre-release>], e.g. v0.1.0"
CHART_VERSION=${VERSION#v}
IMAGE_REPO=${IMAGE_REPO:-localhost/kube-fstack}
IMAGE_REPO=${IMAGE_REPO%/}
REGISTRY=${REGISTRY:-}
# Plain HTTP is for a throwaway registry on this machine (make test-release's): never a real one.
PUSH_TLS=() COSIGN_HTTP=() HELM_HTTP=()
if [ "${REGISTRY_PLAIN_HTTP:-}" = 1 ]; then
  PUSH_TLS=(--tls-verify=false) COSIGN_HTTP=(--allow-http-registry --allow-insecure-registry) HELM_HTTP=(--plain-http)
fi
RELEASE_IMAGES=${RELEASE_IMAGES:-operator cni dataplane}
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
RELEASE_URL=${RELEASE_URL:-https://github.com/kube-fstack/kube-fstack/releases/download/$VERSION}
OUT=${OUT:-_output/release/$VERSION}
HELM=${HELM:-bin/helm-v3.22.0}
COSIGN=${COSIGN:-bin/cosign-v2.6.5}
SYFT=${SYFT:-bin/syft-v1.57.1}
CHART_SRC=charts/kube-fstack

[[ $IMAGE_REPO =~ ^[^[:space:]@:/]+(:[0-9]+)?(/[a-z0-9._-]+)*$ ]] \
  || die "IMAGE_REPO=$IMAGE_REPO: want a registry and path without tag or digest, e.g. registry.example/kube-fstack"
if [ -n "$REGISTRY" ] && [[ ! $REGISTRY =~ ^oci://[^[:space:]]+$ ]]; then
  die "REGISTRY=$REGISTRY: helm pushes charts to OCI registries only: want oci://HOST/PATH"
fi
for p in $IMAGE_PLATFORMS; do
  case "$p" in linux/amd64|linux/arm64) ;; *) die "IMAGE_PLATFORMS: $p is not one the Dockerfiles cross-compile for (linux/amd64, linux/arm64)" ;; esac
done
[ -x "$HELM" ] || die "$HELM missing: run 'make tools' (helm is built from source at a pinned version)"
if [ "$MODE" != chart ]; then
  [ -x "$COSIGN" ] || die "$COSIGN missing: run 'make tools'"
  [ -n "${COSIGN_KEY:-}" ] || die "COSIGN_KEY is empty: pass the releaser's cosign private key (make one with '$COSIGN generate-key-pair'; its password in COSIGN_PASSWORD)"
  [ -f "$COSIGN_KEY" ] || die "COSIGN_KEY=$COSIGN_KEY: no such file"
  export COSIGN_PASSWORD=${COSIGN_PASSWORD:-}
fi
if [ "$MODE" = all ]; then
  [ -x "$SYFT" ] || die "$SYFT missing: run 'make tools'"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$OUT/.work"

# digest_of NAME: the digest the chart names for image NAME, empty when it was not built.
digest_of() { cat "$OUT/images/$1.digest" 2>/dev/null || true; }

# build_multiarch NAME DOCKERFILE: one image per IMAGE_PLATFORMS, an index of them as
# IMAGE_REPO/NAME:VERSION, exported with every platform to images/NAME.oci.tar.
build_multiarch() {
  local name=$1 df=$2 p arch ref list=$IMAGE_REPO/$1:$VERSION
  buildah manifest rm "$list" >/dev/null 2>&1 || true
  buildah rmi "$list" >/dev/null 2>&1 || true
  buildah manifest create "$list" >/dev/null || die "buildah manifest create $list failed"
  for p in $IMAGE_PLATFORMS; do
    arch=${p#linux/}
    ref="$IMAGE_REPO/$name:$VERSION-$arch"
    build_image "$WORK/$name-$arch.oci.tar" "$ref" "$df" "$p" >&2
    buildah manifest add "$list" "containers-storage:$ref" >/dev/null || die "buildah manifest add $list $ref failed"
  done
  push_list "$list" "oci-archive:$OUT/images/$name.oci.tar:$VERSION" "$OUT/images/$name.digest"
}

# push_list LIST DEST DIGESTFILE: the index and every image in it to DEST, in OCI format (the
# format the registry push uses too, so the digest the chart names is the one pushed).
push_list() {
  local tls=()
  case "$2" in oci-archive:*) rm -f "${2#oci-archive:}" ;; docker://*) tls=("${PUSH_TLS[@]}") ;; esac
  buildah manifest push -q --all --format oci "${tls[@]}" --digestfile "$3" "$1" "$2" >/dev/null || die "buildah manifest push $1 $2 failed"
}

# build_images: each of RELEASE_IMAGES into images/, with the recipes the local cluster uses.
# Prints the ones left out.
build_images() {
  # shellcheck source=hack/lib/image.sh
  source hack/lib/image.sh
  local name left=()
  mkdir -p "$OUT/images" "$WORK"
  for name in $RELEASE_IMAGES; do
    rm -f "$OUT/images/$name.digest"
    case "$name" in
      operator) build_multiarch operator Dockerfile ;;
      cni) build_multiarch cni cni/Dockerfile ;;
      dataplane)
        # amd64 only: F-Stack and its DPDK are built here for x86 (dataplane-image/Dockerfile).
        # F-Stack's source is fetched inside the build; never from a local copy.
        if hack/image-dataplane.sh --source-reachable >&2; then
          IMAGE_REF="$IMAGE_REPO/dataplane:$VERSION" IMAGE_OUT="$WORK/dataplane-amd64.oci.tar" hack/image-dataplane.sh >&2
          buildah push -q --format oci --digestfile "$OUT/images/dataplane.digest" "$IMAGE_REPO/dataplane:$VERSION" \
            "oci-archive:$OUT/images/dataplane.oci.tar:$VERSION" >/dev/null || die "buildah push dataplane failed"
        else
          say "the dataplane image is NOT built: F-Stack's source cannot be fetched here (above). Run make release where it can; the recipe is the same (hack/image-dataplane.sh)"
          left+=(dataplane)
        fi ;;
      *) die "RELEASE_IMAGES: unknown image $name (want operator, cni, dataplane)" ;;
    esac
  done
  echo "${left[*]}"
}

# package_chart: a copy of the chart whose image repositories are IMAGE_REPO's and whose digests
# are those of the images built (all mode), packaged with the version; then rendered, to prove
# the package names exactly the release's images.
package_chart() {
  local comp values sets=() want=() got d
  stage="$(mktemp -d)"
  # EXIT, not RETURN: die leaves the function by exiting.
  trap 'rm -rf "$stage"' EXIT
  cp -a "$CHART_SRC" "$stage/kube-fstack"
  values="$stage/kube-fstack/values.yaml"
  for comp in operator cni dataplane; do
    d=""
    [ "$MODE" = chart ] || d="$(digest_of "$comp")"
    sets+=("$comp.image.repository=$IMAGE_REPO/$comp")
    if [ -n "$d" ]; then
      sets+=("$comp.image.digest=$d")
      want+=("$IMAGE_REPO/$comp@$d")
    else
      want+=("$IMAGE_REPO/$comp:$VERSION")
    fi
  done
  # A YAML edit in place (hack/tools/yamlset): only these keys' values change; every comment,
  # which `helm show values` shows the user, stays as written.
  "${GO:-go}" run ./hack/tools/yamlset "$values" "${sets[@]}" \
    || die "$CHART_SRC/values.yaml: cannot point the images at $IMAGE_REPO (above)"
  rm -f "$OUT/kube-fstack-$CHART_VERSION.tgz"
  "$HELM" package "$stage/kube-fstack" --version "$CHART_VERSION" --app-version "$VERSION" -d "$OUT" >&2 \
    || die "helm package failed"
  TGZ="$OUT/kube-fstack-$CHART_VERSION.tgz"
  [ -f "$TGZ" ] || die "helm package wrote no $TGZ"
  # The chart refuses the default namespace (templates/operator-policy.yaml): check it as installed.
  "$HELM" lint --strict "$TGZ" --namespace kube-fstack-system >/dev/null || die "helm lint --strict $TGZ failed"
  # The oldest Kubernetes the chart supports (Chart.yaml kubeVersion); helm's own default is older.
  got="$("$HELM" template kube-fstack "$TGZ" --namespace kube-fstack-system --kube-version 1.30.0 | grep -oE "(image: |--dataplane-image=)[^ \"]+" | sed 's/^image: //; s/^--dataplane-image=//' | sort -u | xargs)"
  want=("$(printf '%s\n' "${want[@]}" | sort | xargs)")
  [ "$got" = "${want[0]}" ] || die "the packaged chart renders images '$got', want '${want[0]}'"
  say "chart: $TGZ (version $CHART_VERSION, appVersion $VERSION; images ${want[0]})"
}

# plugin: the four archives and the krew manifest; each archive's binary gets an SBOM.
plugin() {
  local a dir base
  hack/krew-release.sh "$VERSION" "$RELEASE_URL" "$OUT" >&2 || die "hack/krew-release.sh failed"
  for a in "$OUT"/kubectl-fstack_"$VERSION"_*.tar.gz; do
    base=$(basename "$a" .tar.gz)
    dir="$WORK/$base"
    rm -rf "$dir" && mkdir -p "$dir"
    tar -C "$dir" -xzf "$a"
    sbom "file:$dir/kubectl-fstack" "$OUT/sbom/$base.spdx.json" "kubectl-fstack"
  done
}

# sbom SOURCE OUT NAME: an SPDX SBOM of SOURCE (an image archive or a binary) by syft, offline.
sbom() {
  mkdir -p "$(dirname "$2")"
  SYFT_CHECK_FOR_APP_UPDATE=false "$SYFT" scan -q "$1" --source-name "$3" --source-version "$VERSION" \
    -o "spdx-json=$2" >&2 || die "syft scan $1 failed"
}

# image_sboms: one SBOM per image and architecture, from the single-platform archives.
image_sboms() {
  local name p
  for name in $RELEASE_IMAGES; do
    [ -n "$(digest_of "$name")" ] || continue
    if [ "$name" = dataplane ]; then
      sbom "oci-archive:$WORK/dataplane-amd64.oci.tar" "$OUT/sbom/dataplane_linux_amd64.spdx.json" "$IMAGE_REPO/dataplane"
      continue
    fi
    for p in $IMAGE_PLATFORMS; do
      sbom "oci-archive:$WORK/$name-${p#linux/}.oci.tar" "$OUT/sbom/${name}_linux_${p#linux/}.spdx.json" "$IMAGE_REPO/$name"
    done
  done
}

# sign_images: for each image built, cosign's signature payload of IMAGE@digest signed with the
# key, kept beside the release; pushing attaches it in the registry (cosign attach signature).
sign_images() {
  local name d ref
  mkdir -p "$OUT/signatures"
  for name in $RELEASE_IMAGES; do
    d="$(digest_of "$name")"
    [ -n "$d" ] || continue
    ref="$IMAGE_REPO/$name@$d"
    "$COSIGN" generate "$ref" >"$OUT/signatures/$name.payload.json" 2>"$WORK/cosign.log" \
      || die "cosign generate $ref failed: $(cat "$WORK/cosign.log")"
    sign_blob "$OUT/signatures/$name.payload.json" "$OUT/signatures/$name.sig"
  done
}

sign_blob() {
  "$COSIGN" sign-blob --yes --key "$COSIGN_KEY" --tlog-upload=false --output-signature "$2" "$1" >/dev/null 2>"$WORK/cosign.log" \
    || die "cosign sign-blob $1 failed: $(cat "$WORK/cosign.log")"
}

# checksums_and_signatures: SHA256SUMS of every artifact, each artifact and SHA256SUMS signed.
checksums_and_signatures() {
  local f
  "$COSIGN" public-key --key "$COSIGN_KEY" >"$OUT/cosign.pub" 2>"$WORK/cosign.log" \
    || die "cosign public-key --key $COSIGN_KEY failed (wrong COSIGN_PASSWORD?): $(cat "$WORK/cosign.log")"
  (cd "$OUT" && find . -path ./.work -prune -o -type f ! -name '*.sig' ! -name SHA256SUMS ! -name cosign.pub -print \
    | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >"$WORK/SHA256SUMS" && mv "$WORK/SHA256SUMS" SHA256SUMS)
  while read -r _ f; do
    case "$f" in signatures/*) continue ;; esac
    sign_blob "$OUT/$f" "$OUT/$f.sig"
  done <"$OUT/SHA256SUMS"
  sign_blob "$OUT/SHA256SUMS" "$OUT/SHA256SUMS.sig"
}

# verify: every checksum, every file's signature, and each image signature's payload naming the
# digest of the image archive it signs.
verify() {
  local f n=0 name d got pub=$OUT/cosign.pub
  mkdir -p "$WORK"
  [ -f "$OUT/SHA256SUMS" ] || die "$OUT/SHA256SUMS missing: nothing to verify (run $0 all $VERSION)"
  # The key the releaser passed must be the one that signed: compare its public half.
  "$COSIGN" public-key --key "$COSIGN_KEY" 2>/dev/null | cmp -s - "$pub" || die "$pub is not COSIGN_KEY's public key"
  (cd "$OUT" && sha256sum --quiet -c SHA256SUMS) >&2 || die "SHA256SUMS does not match the files in $OUT"
  for f in SHA256SUMS $(awk '{print $2}' "$OUT/SHA256SUMS"); do
    [ -f "$OUT/$f.sig" ] || continue
    "$COSIGN" verify-blob --key "$pub" --insecure-ignore-tlog=true --signature "$OUT/$f.sig" "$OUT/$f" >/dev/null 2>"$WORK/cosign.log" \
      || die "the signature of $f does not verify with $pub: $(cat "$WORK/cosign.log")"
    n=$((n + 1))
  done
  for f in "$OUT"/signatures/*.payload.json; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .payload.json)
    d=$(cat "$OUT/images/$name.digest")
    got=$(grep -oE '"docker-manifest-digest":"[^"]+"' "$f" | cut -d'"' -f4)
    [ "$got" = "$d" ] || die "signatures/$name.payload.json signs $got, but images/$name.digest is $d"
    oci_digest "$OUT/images/$name.oci.tar" "$d" || die "images/$name.oci.tar's index does not hold $d"
  done
  [ "$n" -gt 0 ] || die "no signature verified in $OUT"
  say "verified: $n signatures and every checksum in $OUT with $pub"
}

# oci_digest ARCHIVE DIGEST: ARCHIVE's top-level index names DIGEST, and DIGEST's blob hashes to it.
oci_digest() {
  local t
  t=$(mktemp -d)
  tar -C "$t" -xf "$1" index.json "blobs/sha256/${2#sha256:}" 2>/dev/null \
    && grep -q "\"$2\"" "$t/index.json" \
    && [ "sha256:$(sha256sum "$t/blobs/sha256/${2#sha256:}" | cut -d' ' -f1)" = "$2" ]
  local rc=$?
  rm -rf "$t"
  return $rc
}

TGZ=
case "$MODE" in
  chart) package_chart; echo "$TGZ"; exit 0 ;;
  verify) verify; exit 0 ;;
esac

# Every artifact is made anew: a stale file of an earlier run must not be signed as this one's.
(cd "$OUT" && rm -rf images sbom signatures kube-fstack-*.tgz kubectl-fstack_* fstack.yaml SHA256SUMS SHA256SUMS.sig cosign.pub ./*.sig)
mkdir -p "$WORK"
missing="$(build_images)"
package_chart
plugin
image_sboms
sign_images
checksums_and_signatures
verify

pushed=()
for name in $RELEASE_IMAGES; do
  case " $missing " in *" $name "*) continue ;; esac
  pushed+=("$name")
done
if [ -n "$REGISTRY" ]; then
  [ -z "$missing" ] || die "not pushing: the chart names $IMAGE_REPO/{${missing// /,}}:$VERSION, which was not built"
  case "$IMAGE_REPO" in localhost/*) die "not pushing: IMAGE_REPO=$IMAGE_REPO is this machine's store; set the registry path users pull from" ;; esac
  for name in "${pushed[@]}"; do
    ref="$IMAGE_REPO/$name:$VERSION" digest="$(digest_of "$name")"
    say "push $ref ($digest)"
    if [ "$name" = dataplane ]; then
      buildah push -q --format oci "${PUSH_TLS[@]}" --digestfile "$WORK/pushed.digest" "$ref" "docker://$ref" >&2 || die "buildah push $ref failed"
    else
      push_list "$ref" "docker://$ref" "$WORK/pushed.digest"
    fi
    [ "$(cat "$WORK/pushed.digest")" = "$digest" ] || die "$ref was pushed as $(cat "$WORK/pushed.digest"), but the chart names $digest: do not publish this chart"
    "$COSIGN" attach signature "${COSIGN_HTTP[@]}" --payload "$OUT/signatures/$name.payload.json" \
      --signature "$OUT/signatures/$name.sig" "$IMAGE_REPO/$name@$digest" >&2 \
      || die "cosign attach signature $IMAGE_REPO/$name@$digest failed"
  done
  # The chart names all three images: publish it only when this run built and pushed them all.
  for name in operator cni dataplane; do
    [ -n "$(digest_of "$name")" ] || die "not pushing the chart: it names $IMAGE_REPO/$name:$VERSION, which this run did not build (RELEASE_IMAGES=$RELEASE_IMAGES); the images above are pushed"
  done
  say "helm push $TGZ $REGISTRY"
  "$HELM" push "${HELM_HTTP[@]}" "$TGZ" "$REGISTRY" >&2 || die "helm push $TGZ $REGISTRY failed"
else
  say "nothing pushed (no REGISTRY=oci://HOST/PATH); with one it would push, check each digest, attach each signature:"
  for name in "${pushed[@]}"; do say "  $IMAGE_REPO/$name:$VERSION ($(digest_of "$name"))"; done
  say "  helm push $TGZ <REGISTRY>"
fi
rm -rf "$WORK"
for name in $missing; do
  say "INCOMPLETE: $IMAGE_REPO/$name:$VERSION, which the chart names, was not built here"
done
say "done: $OUT"
