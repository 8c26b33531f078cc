#!/usr/bin/env bash
# Build kubectl-fstack for every platform of kubectl-fstack/krew/fstack.yaml, pack each as the archive
# the manifest names, and write the manifest with the version, the release URL and each
# archive's sha256 filled in. Upload the archives to RELEASE_URL, then submit the manifest.
# Each archive holds the binary, LICENSE, NOTICE and THIRD_PARTY_NOTICES (the license of every Go
# module that binary links, by hack/tools/notices); they are reproducible (file times are the
# commit's, names sorted, gzip without a time stamp), so a rebuild of the tag gives the same sums.
#   hack/krew-release.sh VERSION RELEASE_URL [OUT_DIR]     (OUT_DIR defaults to _output/krew)
# IMAGE_REPO names where the release's images live; DATAPLANE_DIGEST, when the release built the
# dataplane image, makes the plugin's inject name it by that digest (release.sh passes both).
set -euo pipefail
if [[ $# -lt 2 ]]; then
	echo "usage: $0 VERSION RELEASE_URL [OUT_DIR], e.g. $0 v0.1.0 https://github.com/kube-fstack/kube-fstack/releases/download/v0.1.0" >&2
	exit 2
fi
version=$1 url=$2 out=${3:-_output/krew}
if [[ -n ${DATAPLANE_DIGEST:-} && ! $DATAPLANE_DIGEST =~ ^sha256:[0-9a-f]{64}$ ]]; then
	echo "krew-release: DATAPLANE_DIGEST=$DATAPLANE_DIGEST: want sha256:<64 hex digits> (images/dataplane.digest of the release), or empty" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}
mkdir -p "$out"
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
(cd "$root" && CGO_ENABLED=0 "$go" build -o "$tools/notices" ./hack/tools/notices)
mtime=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
manifest=$(grep -v "^#" "$root/kubectl-fstack/krew/fstack.yaml")
manifest=${manifest//RELEASE_URL/$url}
manifest=${manifest//VERSION/$version}
# Every platform of the manifest; most kubectl users run macOS.
for goos in linux darwin; do
	for arch in amd64 arm64; do
		dir=$(mktemp -d)
		(cd "$root" && CGO_ENABLED=0 GOOS=$goos GOARCH=$arch "$go" build -trimpath -ldflags="-s -w -X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.Version=$version -X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.ImageRepo=${IMAGE_REPO:-localhost/kube-fstack} -X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.DataplaneDigest=${DATAPLANE_DIGEST:-}" -o "$dir/kubectl-fstack" ./kubectl-fstack/cmd/kubectl-fstack)
		cp "$root/LICENSE" "$root/NOTICE" "$dir/"
		"$tools/notices" -o "$dir/THIRD_PARTY_NOTICES" "$dir/kubectl-fstack"
		archive="$out/kubectl-fstack_${version}_${goos}_${arch}.tar.gz"
		tar -C "$dir" --sort=name --mtime="@$mtime" --owner=0 --group=0 --numeric-owner -cf - \
			kubectl-fstack LICENSE NOTICE THIRD_PARTY_NOTICES | gzip -n >"$archive"
		rm -rf "$dir"
		sum=$(sha256sum "$archive" | cut -d' ' -f1)
		placeholder="SHA256_${goos^^}_${arch^^}"
		manifest=${manifest//$placeholder/$sum}
	done
done
printf '%s\n' "$manifest" >"$out/fstack.yaml"
echo "wrote $out/fstack.yaml and the archives beside it" >&2
