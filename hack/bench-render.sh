#!/usr/bin/env bash
# What defaulting and checking a StackInstance spec once (render.Prepare, issue 33) saves on each
# path that turns a spec into a config, against a base revision: the renderer alone
# (BenchmarkRender, every golden scenario), one StackInstance admission request through the
# operator's validating webhook, inject.Prepare (once per StackInstance generation in the pod
# webhook) and the spec's share of a supervisor's start (the snapshot decoded, checked and
# rendered). The test binaries of both revisions are built first (the base in a temporary git
# worktree, removed after), then run interleaved, RUNS times each; it prints per benchmark the
# median ns/op and allocs/op, their spread (min-max) and the ratio new/base. A path benchmark the
# base lacks is added to it: each is written to compile at both revisions.
# Usage: [BASE=<git rev>] [RUNS=5] [BENCHTIME=1s] hack/bench-render.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
ROOT=$(pwd)
BASE=${BASE:-$(git merge-base HEAD main)}
RUNS=${RUNS:-5}
BENCHTIME=${BENCHTIME:-1s}
[ "$RUNS" -ge 1 ] || { echo "RUNS must be at least 1" >&2; exit 2; }

work=$(mktemp -d /tmp/fsk-bench-render.XXXXXX)
wt="$work/base"
cleanup() {
  git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
git worktree add --detach -q "$wt" "$BASE"

# name package benchmark-regexp
benches=(
  "render internal/render ^Benchmark(Render|Prepare)$"
  "webhook operator/internal/webhook ^BenchmarkStackInstanceAdmission$"
  "inject internal/inject ^BenchmarkPrepare$"
  "supervisor dataplane-image/internal/supervisor/facts ^BenchmarkSpecToConfig$"
)
for f in internal/inject/bench_test.go operator/internal/webhook/stackinstance_test.go \
  dataplane-image/internal/supervisor/facts/bench_test.go; do
  [ -e "$wt/$f" ] || cp "$f" "$wt/$f"
done

echo "base $(git rev-parse --short "$BASE"), new: the working tree; building the test binaries" >&2
for arm in base new; do
  src=$ROOT
  [ "$arm" = base ] && src=$wt
  for b in "${benches[@]}"; do
    read -r name pkg _ <<<"$b"
    (cd "$src" && go test -c -o "$work/$arm-$name.test" "./$pkg")
  done
done

out="$work/results"
: >"$out"
for run in $(seq "$RUNS"); do
  for arm in base new; do
    src=$ROOT
    [ "$arm" = base ] && src=$wt
    for b in "${benches[@]}"; do
      read -r name pkg re <<<"$b"
      # From the package's directory: the benchmarks read its testdata.
      (cd "$src/$pkg" && "$work/$arm-$name.test" -test.run '^$' -test.bench "$re" -test.benchmem \
        -test.benchtime "$BENCHTIME") |
        awk -v arm="$arm" -v name="$name" '/^Benchmark/ { sub(/-[0-9]+$/, "", $1); for (i = 2; i < NF; i++) { if ($(i+1) == "ns/op") ns = $i; if ($(i+1) == "allocs/op") al = $i } print arm, name "." $1, ns, al }' >>"$out"
    done
  done
  echo "run $run of $RUNS done" >&2
done

python3 - "$out" "$RUNS" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    arm, name, ns, allocs = line.split()
    rows.setdefault(name, {}).setdefault(arm, []).append((float(ns), float(allocs)))
def cell(v):
    if not v:
        return "-", "-", None, None
    ns = [x[0] for x in v]; al = [x[1] for x in v]
    m, a = statistics.median(ns), statistics.median(al)
    return f"{m:,.0f} ({min(ns):,.0f}-{max(ns):,.0f})", f"{a:,.0f}", m, a
def ratio(n, b):
    return f"{n / b:.2f}x" if n is not None and b else "-"
print(f"{sys.argv[2]} runs per arm, interleaved; ns/op median (min-max)")
hdr = ("benchmark", "base ns/op", "new ns/op", "new/base", "base allocs", "new allocs", "new/base")
table = [hdr]
for name in sorted(rows):
    b, n = cell(rows[name].get("base", [])), cell(rows[name].get("new", []))
    table.append((name, b[0], n[0], ratio(n[2], b[2]), b[1], n[1], ratio(n[3], b[3])))
w = [max(len(r[i]) for r in table) for i in range(len(hdr))]
for r in table:
    print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)))
PY
