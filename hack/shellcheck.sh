#!/usr/bin/env bash
# Runs shellcheck over every shell script of the repository (make lint): the *.sh files, sourced
# libraries included, and every file whose first line is a sh or bash shebang. Run from the root so
# `# shellcheck source=hack/...` directives resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "shellcheck not found: hack/install-deps.sh installs it" >&2; exit 1; }
mapfile -t files < <(
  { git ls-files -co --exclude-standard -- '*.sh'
    git ls-files -z -co --exclude-standard | xargs -0 awk 'FNR == 1 && /^#!.*(bash|\/sh)( |$)/ { print FILENAME } { nextfile }'
  } | sort -u)
[ ${#files[@]} -gt 0 ] || { echo "shellcheck.sh: no shell scripts found" >&2; exit 1; }
shellcheck -x "${files[@]}"
echo "shellcheck: ${#files[@]} scripts clean"
