# with_progress for the long, silent steps (sourced): building Kubernetes from source or an image
# prints nothing for minutes, which looks like a hang to someone running `make run` for the first
# time. A background ticker says on stderr, every PROGRESS_EVERY seconds (default 30), what is
# being built and for how long.
# shellcheck shell=bash

PROGRESS_EVERY="${PROGRESS_EVERY:-30}"

# with_progress WHAT CMD...: runs CMD in the foreground (its exit status is returned), with
# "still WHAT (Ns)" lines while it runs.
with_progress() {
  local what="$1" ticker rc=0 start=$SECONDS
  shift
  (
    # Its sleep goes with it, so no pipe the caller reads stays open; it also ends by itself
    # when the shell that started it is gone.
    parent=$$ s=
    trap 'kill $s 2>/dev/null; exit 0' TERM
    while :; do
      sleep "$PROGRESS_EVERY" & s=$!
      wait "$s"
      kill -0 "$parent" 2>/dev/null || exit 0
      printf '%s still %s (%ss)\n' "$(date +%T)" "$what" "$((SECONDS - start))" >&2
    done
  ) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$rc"
}
