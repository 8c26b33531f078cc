#!/usr/bin/env bash
# A release a platform team can take (`make release VERSION=v0.1.0 COSIGN_KEY=cosign.key`), in OUT:
#   images/<name>.oci.tar        the images as OCI archives: operator and cni one index for every
#                                IMAGE_PLATFORMS (default linux/amd64 linux/arm64), dataplane
#                                linux/amd64 only (F-Stack and its DPDK are built for x86 here)
#   images/<name>.digest         the digest the chart names (of the index for operator and cni)
#   images.txt                   every image built, one a line as IMAGE_REPO/<name>:VERSION@<digest>
#                                (what to mirror: docs/verifying-releases.md)
#   kube-fstack-<chart>.tgz      the chart, naming each image built by digest
#   kubectl-fstack_<v>_<os>_<arch>.tar.gz, fstack.yaml
#                                the plugin for linux/darwin x amd64/arm64 (with LICENSE, NOTICE and
#                                THIRD_PARTY_NOTICES) and its krew manifest (hack/krew-release.sh)
#   sbom/*.spdx.json             an SPDX SBOM per image and architecture and per plugin binary
#                                (syft; with what the dataplane image records it built from source:
#                                F-Stack and its DPDK, dataplane-image/build/package.sh sbom)
#   signatures/<name>.payload.json, .sig
#                                each image's cosign signature of its digest, for an offline check
#   SHA256SUMS, *.sig, cosign.pub
#                                the checksums of every file and a cosign signature of each file
# and, when a registry is given, pushes the images and the chart, and attaches to each image in the
# registry its cosign signature (cosign sign --recursive: the index and each platform's image) and
# its SBOMs as signed attestations (cosign attest --type spdxjson: each platform's image its own,
# the index every platform's), and signs the pushed chart. All are key-signed without a
# transparency log (--tlog-upload=false): verify with `cosign verify --key cosign.pub
# --insecure-ignore-tlog`. Signatures and attestations are stored as cosign's tags
# (sha256-<digest>.sig/.att), not as OCI 1.1 referrers: cosign v2 writes referrers only
# experimentally, and Kyverno, the sigstore policy-controller and `cosign copy` (relocation into a
# private registry) read the tags. It ends by verifying every signature and checksum it wrote, and
# with a registry every signature and attestation there. Nothing is pushed without REGISTRY.
#   hack/release.sh all VERSION       everything above (root, buildah)
#   hack/release.sh chart VERSION     the chart alone, naming the images by tag (no root)
#   hack/release.sh verify VERSION    verify OUT's signatures and checksums again; with REGISTRY,
#                                     also each image's signature and SBOM attestation and the
#                                     chart's signature in the registry (IMAGE_REPO given: the
#                                     images there, e.g. a private mirror, instead of images.txt's)
#   hack/release.sh sbom VERSION SOURCE FILE
#                                     an SPDX SBOM of SOURCE (oci-archive:PATH, dir:PATH) into FILE,
#                                     as the release makes the images'
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
#   RELEASE_PUSH_INCOMPLETE_CHART=1  push and sign the chart although it names images this run did
#                   not build (by tag): for make test-release, which cannot build the dataplane
#                   image; refused unless the registry is plain HTTP on loopback.
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

usage() { die "usage: $0 all|chart|verify VERSION, or $0 sbom VERSION SOURCE FILE (VERSION like v0.1.0)"; }
[ $# -ge 2 ] || usage
MODE=$1 VERSION=$2
case "$MODE" in all|chart|verify) [ $# -eq 2 ] || usage ;; sbom) [ $# -eq 4 ] || usage ;; *) usage ;; esac
# Semver with a leading v: helm needs the chart version as semver, and image tags take no '+'.
[[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] \
  || die "VERSION=$VERSION: want v<major>.<minor>.<patch>[-<pre-release>], e.g. v0.1.0"
CHART_VERSION=${VERSION#v}
# verify checks the images images.txt names unless IMAGE_REPO is given (a mirror of them).
IMAGE_REPO_GIVEN=${IMAGE_REPO:+1}
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
# A key-signed release without a transparency log needs no Sigstore trust root, but cosign
# still looks up its TUF repository's host on every call: a file URL keeps it on this machine.
export TUF_MIRROR=${TUF_MIRROR:-file:///nonexistent/kube-fstack-needs-no-sigstore-tuf}
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
if [ "${RELEASE_PUSH_INCOMPLETE_CHART:-}" = 1 ]; then
  [[ ${REGISTRY_PLAIN_HTTP:-} == 1 && $REGISTRY =~ ^oci://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?/ ]] \
    || die "RELEASE_PUSH_INCOMPLETE_CHART=1 is for a test registry on this machine only (REGISTRY_PLAIN_HTTP=1, REGISTRY=oci://127.0.0.1:PORT/...): a published chart names only images the release built"
fi
if [ "$MODE" = sbom ]; then
  [ -x "$SYFT" ] || die "$SYFT missing: run 'make tools'"
elif [ "$MODE" != chart ]; then
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
  # The plugin's inject names the release's dataplane image by digest when this run built it.
  IMAGE_REPO=$IMAGE_REPO DATAPLANE_DIGEST="$(digest_of dataplane)" hack/krew-release.sh "$VERSION" "$RELEASE_URL" "$OUT" >&2 \
    || die "hack/krew-release.sh failed"
  for a in "$OUT"/kubectl-fstack_"$VERSION"_*.tar.gz; do
    base=$(basename "$a" .tar.gz)
    dir="$WORK/$base"
    rm -rf "$dir" && mkdir -p "$dir"
    tar -C "$dir" -xzf "$a"
    sbom "file:$dir/kubectl-fstack" "$OUT/sbom/$base.spdx.json" "kubectl-fstack"
  done
}

# sbom SOURCE OUT NAME: an SPDX SBOM of SOURCE (an image archive or a binary) by syft, offline.
# The sbom-cataloger (off by default) merges the SPDX documents an image carries: the dataplane
# image's record of F-Stack and DPDK, which it builds from source and no package database lists.
sbom() {
  mkdir -p "$(dirname "$2")"
  SYFT_CHECK_FOR_APP_UPDATE=false "$SYFT" scan -q "$1" --source-name "$3" --source-version "$VERSION" \
    --select-catalogers +sbom-cataloger -o "spdx-json=$2" >&2 || die "syft scan $1 failed"
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

# verify: every checksum; every file's signature, none missing; and every image's signature
# (signatures/NAME.sig over the payload naming IMAGE@digest) verified, its payload naming the
# digest of the image archive it signs. A missing .sig fails: a release whose signatures were
# deleted is not a verified one.
verify() {
  local f n=0 name d got pub=$OUT/cosign.pub
  mkdir -p "$WORK"
  [ -f "$OUT/SHA256SUMS" ] || die "$OUT/SHA256SUMS missing: nothing to verify (run $0 all $VERSION)"
  # The key the releaser passed must be the one that signed: compare its public half.
  "$COSIGN" public-key --key "$COSIGN_KEY" 2>/dev/null | cmp -s - "$pub" || die "$pub is not COSIGN_KEY's public key"
  (cd "$OUT" && sha256sum --quiet -c SHA256SUMS) >&2 || die "SHA256SUMS does not match the files in $OUT"
  for f in SHA256SUMS $(awk '{print $2}' "$OUT/SHA256SUMS"); do
    case "$f" in signatures/*) continue ;; esac # the image signatures' payloads: below
    verify_blob "$OUT/$f" "$OUT/$f.sig" "$f"
    n=$((n + 1))
  done
  for d in "$OUT"/images/*.digest; do
    [ -e "$d" ] || continue
    name=$(basename "$d" .digest)
    d=$(cat "$d")
    f="$OUT/signatures/$name.payload.json"
    [ -f "$f" ] || die "image $name ($d) has no signature payload (signatures/$name.payload.json): every image of a release is signed"
    verify_blob "$f" "$OUT/signatures/$name.sig" "the signature of image $name"
    n=$((n + 1))
    got=$(grep -oE '"docker-manifest-digest":"[^"]+"' "$f" | cut -d'"' -f4)
    [ "$got" = "$d" ] || die "signatures/$name.payload.json signs $got, but images/$name.digest is $d"
    oci_digest "$OUT/images/$name.oci.tar" "$d" || die "images/$name.oci.tar's index does not hold $d"
  done
  [ "$n" -gt 0 ] || die "no signature verified in $OUT"
  say "verified: $n signatures (every artifact's and every image's) and every checksum in $OUT with $pub"
}

# verify_blob FILE SIG WHAT: SIG is there and verifies FILE with the release's public key.
verify_blob() {
  [ -f "$2" ] || die "${2#"$OUT"/} missing: every artifact and image of a release is signed, and $3 has no signature"
  "$COSIGN" verify-blob --key "$OUT/cosign.pub" --insecure-ignore-tlog=true --signature "$2" "$1" >/dev/null 2>"$WORK/cosign.log" \
    || die "the signature of ${1#"$OUT"/} does not verify with $OUT/cosign.pub: $(cat "$WORK/cosign.log")"
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

# image_list: images.txt, every image built as IMAGE_REPO/NAME:VERSION@DIGEST, the list a mirror
# of the release copies (docs/verifying-releases.md).
image_list() {
  local name d
  for name in operator cni dataplane; do
    d="$(digest_of "$name")"
    [ -z "$d" ] || echo "$IMAGE_REPO/$name:$VERSION@$d"
  done >"$OUT/images.txt"
}

# platforms NAME DIGEST: "DIGEST OS_ARCH" of each image in the index DIGEST of images/NAME.oci.tar;
# nothing for a single image (the dataplane).
platforms() {
  python3 - "$OUT/images/$1.oci.tar" "$2" <<'PY' || die "images/$1.oci.tar: cannot read the index $2"
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    doc = json.load(t.extractfile("blobs/sha256/" + sys.argv[2].split(":", 1)[1]))
for m in doc.get("manifests", []):
    p = m.get("platform", {})
    print(m["digest"], p.get("os", "") + "_" + p.get("architecture", ""))
PY
}

# sign_and_attest NAME DIGEST: in the registry, IMAGE_REPO/NAME@DIGEST and every platform's image of
# it signed, and each platform's SBOM attested on that image and on the index (a policy that checks
# the index a pod names finds them there).
sign_and_attest() {
  local name=$1 d=$2 ref="$IMAGE_REPO/$1@$2" pd plat n=0
  "$COSIGN" sign --yes --key "$COSIGN_KEY" --tlog-upload=false --recursive "${COSIGN_HTTP[@]}" "$ref" >/dev/null 2>"$WORK/cosign.log" \
    || die "cosign sign $ref failed: $(cat "$WORK/cosign.log")"
  while read -r pd plat; do
    attest "$IMAGE_REPO/$name@$pd" "$OUT/sbom/${name}_$plat.spdx.json"
    attest "$ref" "$OUT/sbom/${name}_$plat.spdx.json"
    n=$((n + 1))
  done < <(platforms "$name" "$d")
  [ "$n" -gt 0 ] || attest "$ref" "$OUT/sbom/${name}_linux_amd64.spdx.json"
  say "signed $ref and attested its SBOMs"
}

attest() {
  [ -f "$2" ] || die "no SBOM ${2#"$OUT"/} to attest on $1"
  "$COSIGN" attest --yes --key "$COSIGN_KEY" --tlog-upload=false --type spdxjson --predicate "$2" "${COSIGN_HTTP[@]}" "$1" >/dev/null 2>"$WORK/cosign.log" \
    || die "cosign attest $1 failed: $(cat "$WORK/cosign.log")"
}

# chart_name: the chart's name, which helm push makes the last path element of its OCI reference.
chart_name() { sed -n 's/^name: *//p' "$CHART_SRC/Chart.yaml"; }

# push_chart: helm push, then a cosign signature on the digest helm pushed.
push_chart() {
  local log d ref
  say "helm push $TGZ $REGISTRY"
  log="$("$HELM" push "${HELM_HTTP[@]}" "$TGZ" "$REGISTRY" 2>&1)" || die "helm push $TGZ $REGISTRY failed: $log"
  d="$(sed -n 's/^Digest: *//p' <<<"$log")"
  [[ $d =~ ^sha256:[0-9a-f]{64}$ ]] || die "helm push printed no digest: $log"
  ref="${REGISTRY#oci://}/$(chart_name)@$d"
  "$COSIGN" sign --yes --key "$COSIGN_KEY" --tlog-upload=false "${COSIGN_HTTP[@]}" "$ref" >/dev/null 2>"$WORK/cosign.log" \
    || die "cosign sign $ref failed: $(cat "$WORK/cosign.log")"
  say "chart pushed and signed: $ref"
}

# verify_registry: in the registry, every image of images.txt (or its copy under IMAGE_REPO when
# given) and each of its platforms' images has a signature and an SPDX attestation that verify
# with cosign.pub, and the chart REGISTRY holds for this version has a signature that does. What a
# policy engine checks at admission, checked before anyone deploys.
verify_registry() {
  local line repo name d pd plat n=0 pub=$OUT/cosign.pub
  mkdir -p "$WORK"
  [ -f "$OUT/images.txt" ] || die "$OUT/images.txt missing: no image list to check in the registry"
  while read -r line; do
    repo=${line%@*} d=${line##*@}
    repo=${repo%:*} name=${repo##*/}
    [ -z "$IMAGE_REPO_GIVEN" ] || repo=$IMAGE_REPO/$name
    [ "$d" = "$(digest_of "$name")" ] || die "images.txt names $name at $d, but images/$name.digest is $(digest_of "$name")"
    verify_image "$repo@$d"
    while read -r pd plat; do
      verify_image "$repo@$pd" "$plat"
    done < <(platforms "$name" "$d")
    n=$((n + 1))
  done <"$OUT/images.txt"
  [ "$n" -gt 0 ] || die "images.txt lists no image"
  if [ -n "$REGISTRY" ]; then
    line="${REGISTRY#oci://}/$(chart_name):$CHART_VERSION"
    "$COSIGN" verify --key "$pub" --insecure-ignore-tlog=true "${COSIGN_HTTP[@]}" "$line" >/dev/null 2>"$WORK/cosign.log" \
      || die "the chart $line has no signature that verifies with $pub: $(cat "$WORK/cosign.log")"
  fi
  local chart=""
  [ -z "$REGISTRY" ] || chart=", and the signature of the chart"
  say "verified in the registry: the signatures and SBOM attestations of $n images and each of their platforms$chart, with $pub"
}

# verify_image REF [PLATFORM]: REF's cosign signature and SPDX attestation verify with cosign.pub.
verify_image() {
  local pub=$OUT/cosign.pub
  "$COSIGN" verify --key "$pub" --insecure-ignore-tlog=true "${COSIGN_HTTP[@]}" "$1" >/dev/null 2>"$WORK/cosign.log" \
    || die "image $1${2:+ ($2)} has no signature that verifies with $pub: $(cat "$WORK/cosign.log")"
  "$COSIGN" verify-attestation --key "$pub" --insecure-ignore-tlog=true --type spdxjson "${COSIGN_HTTP[@]}" "$1" >/dev/null 2>"$WORK/cosign.log" \
    || die "image $1${2:+ ($2)} has no SPDX SBOM attestation that verifies with $pub: $(cat "$WORK/cosign.log")"
}

TGZ=
case "$MODE" in
  chart) package_chart; echo "$TGZ"; exit 0 ;;
  verify)
    verify
    if [ -n "$REGISTRY" ]; then verify_registry; else say "not checked: the registry (pass REGISTRY=oci://HOST/PATH to check the signatures and attestations there)"; fi
    exit 0 ;;
  sbom) sbom "$3" "$4" "$IMAGE_REPO"; exit 0 ;;
esac

# Every artifact is made anew: a stale file of an earlier run must not be signed as this one's.
(cd "$OUT" && rm -rf images images.txt sbom signatures kube-fstack-*.tgz kubectl-fstack_* fstack.yaml SHA256SUMS SHA256SUMS.sig cosign.pub ./*.sig)
mkdir -p "$WORK"
missing="$(build_images)"
image_list
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
    sign_and_attest "$name" "$digest"
  done
  # The chart names all three images: publish it only when this run built and pushed them all.
  for name in operator cni dataplane; do
    [ -n "$(digest_of "$name")" ] || [ "${RELEASE_PUSH_INCOMPLETE_CHART:-}" = 1 ] \
      || die "not pushing the chart: it names $IMAGE_REPO/$name:$VERSION, which this run did not build (RELEASE_IMAGES=$RELEASE_IMAGES); the images above are pushed"
  done
  push_chart
  verify_registry
else
  say "nothing pushed (no REGISTRY=oci://HOST/PATH); with one it would push, check each digest, sign each image and attest its SBOMs:"
  for name in "${pushed[@]}"; do say "  $IMAGE_REPO/$name:$VERSION ($(digest_of "$name"))"; done
  say "  helm push $TGZ <REGISTRY>, and sign the chart"
fi
rm -rf "$WORK"
for name in $missing; do
  say "INCOMPLETE: $IMAGE_REPO/$name:$VERSION, which the chart names, was not built here"
done
say "done: $OUT"
