#!/usr/bin/env bash
# What holding the pod's spec snapshot to the CRD costs fstack-supervisor's binary, built as the
# dataplane image builds it (static, -trimpath, -s -w). The supervisor checks the snapshot with
# internal/crdwalk (the CRD's OpenAPI bounds and defaults, walked without kube-apiserver's
# libraries; the CEL rules' twins are in internal/render); this prints its size beside the same
# binary linking kube-apiserver's defaulting and OpenAPI validation (the CRD without CEL), and
# linking internal/crdschema (the CRD with CEL, as `kubectl fstack` admits a manifest), each
# with its ratio to the supervisor as built. The two variants are added to the build with
# `go build -overlay`, so nothing in the tree changes. BENCH_SIZE_BASE=<git revision> also
# builds the supervisor of that revision (the ratio of this tree to it is the walker's cost).
# hack/bench-supervisor-size.baseline is this script's output when the walker was chosen.
# Usage: [BENCH_SIZE_BASE=<rev>] hack/bench-supervisor-size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export CGO_ENABLED=0

work=$(mktemp -d /tmp/fsk-size.XXXXXX)
trap 'rm -rf "$work"' EXIT
pkg=./dataplane-image/cmd/fstack-supervisor
dir=$(cd "$pkg" && pwd)

build() { # build OUT [overlay.json] [source dir]
  local out=$1 overlay=${2:-} src=${3:-.}
  (cd "$src" && go build -trimpath -ldflags='-s -w' ${overlay:+-overlay "$overlay"} -o "$out" "$pkg")
  stat -c %s "$out"
}

# Each variant is a file added to package main whose init calls the libraries behind a condition
# the linker cannot see through, so their code is linked as a real caller would link it.
cat >"$work/nocel.go" <<'GO'
package main

import (
	"os"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
)

func init() {
	if len(os.Args) > 1<<20 {
		s, _ := structuralschema.NewStructural(&apiextensions.JSONSchemaProps{})
		defaulting.Default(nil, s)
		v, _, _ := validation.NewSchemaValidator(nil)
		_ = validation.ValidateCustomResource(nil, nil, v)
		_ = listtype.ValidateListSetsAndMaps(nil, s, nil)
	}
}
GO
cat >"$work/cel.go" <<'GO'
package main

import (
	"os"

	"github.com/kube-fstack/kube-fstack/internal/crdschema"
)

func init() {
	if len(os.Args) > 1<<20 {
		_ = crdschema.Admit(nil)
	}
}
GO
for v in nocel cel; do
  printf '{"Replace":{"%s/zz_size_%s.go":"%s/%s.go"}}' "$dir" "$v" "$work" "$v" >"$work/$v.json"
done

echo "bench-supervisor-size: building fstack-supervisor three ways" >&2
walk=$(build "$work/walk")
nocel=$(build "$work/nocel" "$work/nocel.json")
cel=$(build "$work/cel" "$work/cel.json")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
printf '%-52s %10s %7s\n' "fstack-supervisor" "bytes" "ratio"
if [ -n "${BENCH_SIZE_BASE:-}" ]; then
  git worktree add -q --detach "$work/base" "$BENCH_SIZE_BASE"
  base=$(build "$work/base.bin" "" "$work/base")
  git worktree remove --force "$work/base"
  printf '%-52s %10d %7s\n' "at $BENCH_SIZE_BASE" "$base" "$(ratio "$base" "$walk")"
fi
printf '%-52s %10d %7s\n' "as built (crdwalk + render's CEL twins)" "$walk" "1.000"
printf '%-52s %10d %7s\n' "+ apiserver defaulting and OpenAPI validation" "$nocel" "$(ratio "$nocel" "$walk")"
printf '%-52s %10d %7s\n' "+ internal/crdschema (OpenAPI + CEL)" "$cel" "$(ratio "$cel" "$walk")"
