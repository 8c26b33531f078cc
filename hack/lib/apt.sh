# apt-get that waits for another apt instead of failing at once (sourced by hack/install-deps.sh).
# A fresh VM runs apt-daily at boot. apt's DPkg::Lock::Timeout covers only dpkg's locks, not the
# lists lock `apt-get update` takes, so without this the first `make run` on such a VM ends in a
# bare "Could not get lock /var/lib/apt/lists/lock". The wait is bounded and says every
# APT_LOCK_REPORT_EVERY seconds which process holds which lock, so a stuck apt can be dealt with.
#   APT_LOCK_FILES         the locks to wait for (default: dpkg's, the lists' and the archives')
#   APT_LOCK_WAIT          seconds to wait in all before failing (default 600)
#   APT_LOCK_REPORT_EVERY  seconds between two messages while waiting (default 10)
# shellcheck shell=bash

APT_LOCK_FILES="${APT_LOCK_FILES:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}"
APT_LOCK_WAIT="${APT_LOCK_WAIT:-600}"
APT_LOCK_REPORT_EVERY="${APT_LOCK_REPORT_EVERY:-10}"

# apt_lock_holders prints "PID COMMAND PATH" for every lock held on one of APT_LOCK_FILES. apt
# takes fcntl locks and flock(1) takes flock locks; the kernel lists both in /proc/locks, which
# lslocks reads and resolves to paths.
apt_lock_holders() {
  local f
  for f in $APT_LOCK_FILES; do
    [ -e "$f" ] || continue
    lslocks -n -r -o PID,COMMAND,PATH 2>/dev/null | awk -v f="$f" '$3 == f' || true
  done
}

# apt_wait_locks: returns once no process holds an apt lock; fails after APT_LOCK_WAIT seconds,
# naming the holders.
apt_wait_locks() {
  local start=$SECONDS last=-1 holders waited
  command -v lslocks >/dev/null || { echo "apt: lslocks (util-linux) is needed to see who holds apt's locks" >&2; return 1; }
  while holders="$(apt_lock_holders)"; [ -n "$holders" ]; do
    waited=$((SECONDS - start))
    if [ "$waited" -ge "$APT_LOCK_WAIT" ]; then
      echo "apt: gave up after ${waited}s waiting for another apt to finish; holders (pid command lock):" >&2
      printf '%s\n' "$holders" | sed 's/^/  /' >&2
      echo "apt: wait for it (apt-daily runs at boot: systemctl status apt-daily.service) or stop it, then run again" >&2
      return 1
    fi
    if [ "$last" -lt 0 ] || [ $((waited - last)) -ge "$APT_LOCK_REPORT_EVERY" ]; then
      echo "apt: waiting for another apt to release its lock (${waited}s of ${APT_LOCK_WAIT}s): $(printf '%s' "$holders" | awk '{printf "%spid %s (%s) holds %s", (NR > 1 ? "; " : ""), $1, $2, $3}')" >&2
      last=$waited
    fi
    sleep 1
  done
}

# apt_get ARGS...: apt-get once the locks are free. Another apt may still take a lock between the
# wait and apt-get's own locking: then apt-get's "Could not get lock" sends it back to waiting,
# until APT_LOCK_WAIT runs out. DPkg::Lock::Timeout still covers dpkg's locks.
apt_get() {
  local start=$SECONDS out rc
  out="$(mktemp)"
  while :; do
    apt_wait_locks || { rm -f "$out" "$out.rc"; return 1; }
    # Shown as it runs (an install takes minutes), kept to look for the lock error.
    # apt-get's status through a file: a pipeline's status depends on the caller's pipefail.
    { rc=0; apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" "$@" || rc=$?; echo "$rc" >"$out.rc"; } 2>&1 | tee "$out"
    rc="$(cat "$out.rc")"
    if [ "$rc" -ne 0 ] && grep -q 'Could not get lock' "$out" && [ $((SECONDS - start)) -lt "$APT_LOCK_WAIT" ]; then
      echo "apt: another apt took the lock first; waiting again" >&2
      continue
    fi
    rm -f "$out" "$out.rc"
    return "$rc"
  done
}
