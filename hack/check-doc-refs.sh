#!/usr/bin/env bash
# Checks that every citation of the repository's own references resolves: a `docs/<name>.md`
# names a file that exists, a `§N` after it a section heading of that file, and an `RN` a row of
# its rule table. It also fails on citations of documents a user of the repository does not have
# (the team's FSTACK.md and PLATFORM.md), so a new comment cannot point outside the tree.
# testdata is read too: a stand-in's comment (a fake F-Stack Makefile) is read like code's.
set -euo pipefail
cd "$(dirname "$0")/.."

# Not this script nor its test, which cite what they must refuse.
files() {
  git ls-files -- ':!docs/*.md' ':!hack/check-doc-refs.sh' ':!test/hack/docrefs_test.go'
}

fail=0
if hits=$(files | xargs -r grep -HnE '\b(FSTACK|PLATFORM)\.md' 2>/dev/null); then
  echo "check-doc-refs: cite docs/fstack-rules.md or docs/local-cluster.md instead:" >&2
  echo "$hits" >&2
  fail=1
fi

while IFS= read -r hit; do
  where=${hit%%:docs/*}
  ref=docs/${hit#*:docs/}
  doc=${ref%% *}
  if [ ! -f "$doc" ]; then
    echo "check-doc-refs: $where cites $doc, which does not exist" >&2
    fail=1
    continue
  fi
  rest=${ref#"$doc"}
  if [[ $rest =~ ^\ §([0-9]+(\.[0-9]+)?) ]]; then
    sec=${BASH_REMATCH[1]}
    if ! grep -qE "^#+ §${sec//./\\.} " "$doc"; then
      echo "check-doc-refs: $where cites $doc §$sec, which has no such section" >&2
      fail=1
    fi
    rest=${rest#" §$sec"}
    if [[ $rest =~ ^\ (R[0-9]+) ]] && ! grep -qE "^\| ${BASH_REMATCH[1]} \|" "$doc"; then
      echo "check-doc-refs: $where cites $doc ${BASH_REMATCH[1]}, which is not a rule there" >&2
      fail=1
    fi
  fi
done < <(files | xargs -r grep -HnoE 'docs/[a-z0-9-]+\.md( §[0-9]+(\.[0-9]+)?( R[0-9]+)?)?' 2>/dev/null || true)

[ $fail -eq 0 ] && echo "check-doc-refs: every citation resolves"
exit $fail
