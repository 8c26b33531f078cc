#!/usr/bin/env bash
# Runs every fuzz target of the repository for FUZZTIME each (default 60s) and prints each
# target's exec count. Targets are discovered, not listed: a package with a `func FuzzX(f
# *testing.F)` in a _test.go file is asked for its targets with `go test -list`, which honours
# build tags. Arguments, if any, restrict the run to those package patterns (./cni/...).
# A failing target prints the end of its log; go test has saved the input under the package's
# testdata/fuzz/<target>/, where it becomes a regression seed once committed.
# What fails the run is that file, not go test's exit status alone: under CPU starvation the fuzz
# coordinator itself can end at the -fuzztime boundary with "context deadline exceeded" and no
# input written, which says nothing about the code. Such a run is reported as WARN and passes;
# a new file under testdata/fuzz/<target>/ is a crasher and fails, printed. The committed seeds
# run as regression tests in every plain `go test` (make test-unit) either way.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

# Candidate package directories: those with a fuzz target in a test file.
candidates() {
  local roots=("$@")
  [ ${#roots[@]} -gt 0 ] || roots=(.)
  for r in "${roots[@]}"; do
    r=${r%/...}
    grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=.cache --exclude-dir=bin --exclude-dir=_output '^func Fuzz[A-Za-z0-9_]*\(' "$r" 2>/dev/null || true
  done | grep -vE '^\./(\.cache|bin|_output)/' | xargs -r -n1 dirname | sort -u
}

# corpus_files DIR: the inputs saved under a target's testdata/fuzz directory, sorted.
corpus_files() {
  [ -d "$1" ] || return 0
  find "$1" -type f | LC_ALL=C sort
}

# list gets "<package dir> <target>" for each fuzz target go test lists; a candidate package
# whose tests do not build fails the run rather than dropping out of it.
list=()
for dir in $(candidates "$@"); do
  pkg="./${dir#./}"
  if ! names=$("$GO" test -list '^Fuzz' "$pkg" 2>&1); then
    echo "fuzz: cannot list the fuzz targets of $pkg:" >&2
    echo "$names" >&2
    exit 1
  fi
  while read -r name; do
    list+=("$pkg $name")
  done < <(grep -E '^Fuzz' <<<"$names" || true)
done
if [ ${#list[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: ${#list[@]} targets, ${FUZZTIME} each"
failed=0
results=()
for entry in "${list[@]}"; do
  read -r pkg name <<<"$entry"
  log="$log_dir/$(echo "$pkg-$name" | tr '/.' '__').log"
  corpus="$pkg/testdata/fuzz/$name"
  before="$(corpus_files "$corpus")"
  if "$GO" test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -v >"$log" 2>&1; then
    status=ok
  else
    status=FAIL
  fi
  new_inputs="$(LC_ALL=C comm -13 <(printf '%s\n' "$before") <(corpus_files "$corpus") | sed '/^$/d')"
  if [ "$status" = FAIL ] && [ -z "$new_inputs" ] && grep -q 'context deadline exceeded' "$log" \
      && ! grep -q 'Failing input written' "$log"; then
    status=WARN
  fi
  [ "$status" != FAIL ] || failed=1
  execs=$(grep -oE 'fuzz: elapsed: [0-9a-z.]+, execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$' || true)
  results+=("$(printf '%-4s %-48s %-22s %12s' "$status" "$pkg" "$name" "${execs:-?}")")
  printf '%-4s %-48s %-22s execs: %s\n' "$status" "$pkg" "$name" "${execs:-?}"
  if [ "$status" = WARN ]; then
    echo "    warning: the fuzz coordinator ended at the -fuzztime boundary (context deadline exceeded) with no failing input written: the machine was too busy, not a crasher"
  fi
  if [ "$status" = FAIL ]; then
    tail -40 "$log" | sed 's/^/    /'
    for f in $new_inputs; do
      echo "    crasher $f (commit it as a regression seed once fixed):"
      head -c 2000 "$f" | cat -v | sed 's/^/      /'
    done
  fi
done
echo
printf '%-4s %-48s %-22s %12s\n' "" package target execs
printf '%s\n' "${results[@]}"
exit "$failed"
