#!/usr/bin/env bash
# A release a user can install (`make release VERSION=v0.1.0`): the three images tagged with the
# version, the chart packaged with that version naming them, and, when a registry is given, both
# pushed. Nothing is pushed without one: it prints what it would push.
#   hack/release.sh all VERSION       images (root, buildah), chart, push or what it would push
#   hack/release.sh chart VERSION     the chart alone (no root; test/chart packages it this way)
# Environment:
#   IMAGE_REPO      where the images live, without the component: IMAGE_REPO/operator,
#                   IMAGE_REPO/cni, IMAGE_REPO/dataplane (default localhost/kube-fstack, this
#                   machine's buildah store). The packaged chart's defaults name these.
#   REGISTRY        an OCI registry for the chart, oci://HOST/PATH: `helm push` sends it there and
#                   the images are pushed to IMAGE_REPO. Empty: nothing is pushed.
#   RELEASE_IMAGES  the images to build (default "operator cni dataplane").
#   OUT             output directory (default _output/release/VERSION).
# The chart's version is VERSION without the v, its appVersion VERSION (charts/kube-fstack/Chart.yaml
# says how they move); the chart's image tags default to the appVersion, so the package names the
# images of its own release. The real dataplane image is built from F-Stack's source
# (hack/image-dataplane.sh): where that cannot be fetched it is left out, said so, and a push refused.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

die() { printf 'release: ERROR: %s\n' "$*" >&2; exit 1; }
say() { printf 'release: %s\n' "$*" >&2; }

usage() { die "usage: $0 all|chart VERSION (VERSION like v0.1.0)"; }
[ $# -eq 2 ] || usage
MODE=$1 VERSION=$2
case "$MODE" in all|chart) ;; *) usage ;; esac
# Semver with a leading v: helm needs the chart version as semver, and image tags take no '+'.
[[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] \
  || die "VERSION=$VERSION: want v<major>.<minor>.<patch>[-<pre-release>], e.g. v0.1.0"
CHART_VERSION=${VERSION#v}
IMAGE_REPO=${IMAGE_REPO:-localhost/kube-fstack}
IMAGE_REPO=${IMAGE_REPO%/}
REGISTRY=${REGISTRY:-}
RELEASE_IMAGES=${RELEASE_IMAGES:-operator cni dataplane}
OUT=${OUT:-_output/release/$VERSION}
HELM=${HELM:-bin/helm-v3.22.0}
CHART_SRC=charts/kube-fstack

[[ $IMAGE_REPO =~ ^[^[:space:]@:/]+(:[0-9]+)?(/[a-z0-9._-]+)*$ ]] \
  || die "IMAGE_REPO=$IMAGE_REPO: want a registry and path without tag or digest, e.g. registry.example/kube-fstack"
if [ -n "$REGISTRY" ] && [[ ! $REGISTRY =~ ^oci://[^[:space:]]+$ ]]; then
  die "REGISTRY=$REGISTRY: helm pushes charts to OCI registries only: want oci://HOST/PATH"
fi
[ -x "$HELM" ] || die "$HELM missing: run 'make tools' (helm is built from source at a pinned version)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

# build_images: each of RELEASE_IMAGES as IMAGE_REPO/<name>:VERSION in buildah's store and as
# OUT/<name>.oci.tar, with the recipes the local cluster uses. Prints the ones left out.
build_images() {
  # shellcheck source=hack/lib/image.sh
  source hack/lib/image.sh
  local name left=()
  for name in $RELEASE_IMAGES; do
    case "$name" in
      operator) build_image "$OUT/operator.oci.tar" "$IMAGE_REPO/operator:$VERSION" Dockerfile >&2 ;;
      cni) build_image "$OUT/cni.oci.tar" "$IMAGE_REPO/cni:$VERSION" cni/Dockerfile >&2 ;;
      dataplane)
        # F-Stack's source is fetched inside the build; never from a local copy.
        if hack/image-dataplane.sh --source-reachable >&2; then
          IMAGE_REF="$IMAGE_REPO/dataplane:$VERSION" IMAGE_OUT="$OUT/dataplane.oci.tar" hack/image-dataplane.sh >&2
        else
          say "the dataplane image is NOT built: F-Stack's source cannot be fetched here (above). Run make release where it can; the recipe is the same (hack/image-dataplane.sh)"
          left+=(dataplane)
        fi ;;
      *) die "RELEASE_IMAGES: unknown image $name (want operator, cni, dataplane)" ;;
    esac
  done
  echo "${left[*]}"
}

# package_chart: a copy of the chart whose image repositories are IMAGE_REPO's, packaged with the
# version; then rendered, to prove the package names exactly the release's images.
package_chart() {
  local comp values want got
  stage="$(mktemp -d)"
  # EXIT, not RETURN: die leaves the function by exiting.
  trap 'rm -rf "$stage"' EXIT
  cp -a "$CHART_SRC" "$stage/kube-fstack"
  values="$stage/kube-fstack/values.yaml"
  for comp in operator cni dataplane; do
    grep -q "^    repository: localhost/kube-fstack/$comp\$" "$values" \
      || die "$CHART_SRC/values.yaml: no '    repository: localhost/kube-fstack/$comp' line to point at $IMAGE_REPO/$comp"
    sed -i "s|^    repository: localhost/kube-fstack/$comp\$|    repository: $IMAGE_REPO/$comp|" "$values"
  done
  rm -f "$OUT/kube-fstack-$CHART_VERSION.tgz"
  "$HELM" package "$stage/kube-fstack" --version "$CHART_VERSION" --app-version "$VERSION" -d "$OUT" >&2 \
    || die "helm package failed"
  TGZ="$OUT/kube-fstack-$CHART_VERSION.tgz"
  [ -f "$TGZ" ] || die "helm package wrote no $TGZ"
  # The chart refuses the default namespace (templates/operator-policy.yaml): check it as installed.
  "$HELM" lint --strict "$TGZ" --namespace kube-fstack-system >/dev/null || die "helm lint --strict $TGZ failed"
  # The oldest Kubernetes the chart supports (Chart.yaml kubeVersion); helm's own default is older.
  got="$("$HELM" template kube-fstack "$TGZ" --namespace kube-fstack-system --kube-version 1.30.0 | grep -oE "(image: |--dataplane-image=)[^ \"]+" | sed 's/^image: //; s/^--dataplane-image=//' | sort -u | xargs)"
  want="$IMAGE_REPO/cni:$VERSION $IMAGE_REPO/dataplane:$VERSION $IMAGE_REPO/operator:$VERSION"
  [ "$got" = "$want" ] || die "the packaged chart renders images '$got', want '$want'"
  say "chart: $TGZ (version $CHART_VERSION, appVersion $VERSION; images $want)"
}

TGZ=
if [ "$MODE" = chart ]; then
  package_chart
  echo "$TGZ"
  exit 0
fi

missing="$(build_images)"
package_chart

pushed=()
for name in $RELEASE_IMAGES; do
  case " $missing " in *" $name "*) continue ;; esac
  pushed+=("$IMAGE_REPO/$name:$VERSION")
done
if [ -n "$REGISTRY" ]; then
  [ -z "$missing" ] || die "not pushing: the chart names $IMAGE_REPO/{${missing// /,}}:$VERSION, which was not built"
  case "$IMAGE_REPO" in localhost/*) die "not pushing: IMAGE_REPO=$IMAGE_REPO is this machine's store; set the registry path users pull from" ;; esac
  for ref in "${pushed[@]}"; do
    say "buildah push $ref"
    buildah push "$ref" "docker://$ref" >&2 || die "buildah push $ref failed"
  done
  say "helm push $TGZ $REGISTRY"
  "$HELM" push "$TGZ" "$REGISTRY" >&2 || die "helm push $TGZ $REGISTRY failed"
else
  say "nothing pushed (no REGISTRY=oci://HOST/PATH); with one it would run:"
  for ref in "${pushed[@]}"; do say "  buildah push $ref docker://$ref"; done
  say "  helm push $TGZ <REGISTRY>"
fi
for name in $missing; do
  say "INCOMPLETE: $IMAGE_REPO/$name:$VERSION, which the chart names, was not built here"
done
say "done: $OUT"
