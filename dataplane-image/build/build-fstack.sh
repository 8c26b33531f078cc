#!/usr/bin/env bash
# Builds F-Stack v1.25 for the kube-fstack dataplane image, one named step at a time:
#   build-fstack.sh STEP...           fetch patch dpdk lib tools adapter install (or: all)
#   build-fstack.sh verify-pin        the tree at FF_PATH is the pinned commit, unmodified
#   build-fstack.sh steps             the build steps, in order (the Dockerfile runs each)
#   build-fstack.sh check-libs DIR... every binary under DIR resolves all its libraries
# The Dockerfile's fstack stage runs the steps, its last stage runs check-libs. build_test.go runs
# them against a stand-in of F-Stack's tree. README.md ("Building the image") says why each
# step is the way it is; docs/fstack-rules.md §8 has the measurements behind them.
set -euo pipefail

FSTACK_REPO=${FSTACK_REPO:-https://github.com/F-Stack/f-stack.git}
# The tag v1.25. A commit id is a hash over the whole tree, and git checks every object it
# receives against its id: checking HEAD checks the source, with no archive checksum to trust.
FSTACK_COMMIT=${FSTACK_COMMIT:-761639943bdda33103aa98241ca6a3079f1c1b7e}
export FF_PATH=${FF_PATH:-/src/f-stack}
export PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-/usr/local/lib/x86_64-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:/usr/lib/pkgconfig}
PATCH_DIR=${PATCH_DIR:-/src/patches}
OUT=${OUT:-/out}
LIB_PREFIX=${LIB_PREFIX:-/usr/local}
JOBS=${JOBS:-$(nproc)}

BUILD_STEPS=(fetch patch dpdk lib tools adapter install)
# The DPDK drivers built (meson's enable_drivers; bus/pci, bus/vdev and mempool/ring always are):
# what a kube-fstack port can be. vhost-user and KNI ports are virtio_user (net/virtio, which also
# drives virtio PCI functions in VMs); bonds are net/bonding; PCI ports are SR-IOV VFs and PFs of the
# Intel families (ixgbe, i40e, iavf, ice, e1000/igb), VMware and AWS NICs; net/ring and net/null
# for tests. mlx5 needs rdma-core, which the image has never had. DPDK refuses to configure when
# a driver listed here cannot be built, so this list cannot silently shrink.
DPDK_DRIVERS=(bus/pci bus/vdev mempool/ring common/iavf
  net/virtio net/bonding net/ixgbe net/i40e net/iavf net/ice net/e1000 net/vmxnet3 net/ena net/ring net/null)
# DPDK's optional libraries built (meson's enable_libs; DPDK's core libraries always are). F-Stack
# links every DPDK library whole into each binary (its Makefiles put --whole-archive before
# pkg-config's list), so each unused one costs every binary: F-Stack itself uses only core
# libraries (eal, mempool, mbuf, ring, ethdev, net, timer, hash); net/bonding needs sched and
# ip_frag, net/iavf and net/ixgbe need security and cryptodev. With all 40 optional libraries each
# binary was about 9 MB stripped.
DPDK_LIBS=(cryptodev security sched ip_frag)
# The probe agent reaches the app's F-Stack listener from inside the pod: the stack delivers
# packets addressed to itself only when lib is built with it (docs/fstack-rules.md §5).
LIB_MAKE_VARS=(FF_LOOPBACK_SUPPORT=1)
# The tools the image ships as ff_<name>. Not ngctl (nor libnetgraph, its library): lib is built
# without FF_NETGRAPH, so ngctl could only ever get ENOTSUP, and libnetgraph fails gcc 12's
# -Werror=stringop-overflow (upstream silences it for gcc >= 13 only).
FSTACK_TOOLS=(arp ifconfig ipfw knictl ndp netstat route sysctl top traffic)
TOOLS_SKIPPED=(libnetgraph ngctl)
# Shim modes: directory name (the supervisor's ShimMode()), then the adapter's make variables.
SHIM_MODES=(
  "kernel-event+multi-sc FF_KERNEL_EVENT=1 FF_MULTI_SC=1"
  "kernel-event FF_KERNEL_EVENT=1"
  "multi-sc FF_MULTI_SC=1"
  "pipeline"
  "thread-socket FF_THREAD_SOCKET=1"
  "multi-sc+polling FF_MULTI_SC=1 FF_PRELOAD_POLLING_MODE=1"
)

log() { printf '[build-fstack] %s\n' "$*" >&2; }
die() {
  printf '[build-fstack] ERROR: %s\n' "$*" >&2
  exit 1
}

step_fetch() {
  [[ $FSTACK_COMMIT =~ ^[0-9a-f]{40}$ ]] ||
    die "FSTACK_COMMIT must be a full 40-hex commit id, not '$FSTACK_COMMIT' (tags and branches move)"
  [[ ! -e $FF_PATH ]] || die "$FF_PATH already exists; fetch needs a fresh place"
  git init -q "$FF_PATH"
  git -C "$FF_PATH" fetch -q --depth 1 "$FSTACK_REPO" "$FSTACK_COMMIT"
  git -C "$FF_PATH" -c advice.detachedHead=false checkout -q FETCH_HEAD
  step_verify_pin
}

step_verify_pin() {
  local head
  head=$(git -C "$FF_PATH" rev-parse HEAD) || die "$FF_PATH is not a git checkout of F-Stack"
  [[ $head == "$FSTACK_COMMIT" ]] || die "F-Stack at $FF_PATH is commit $head, expected $FSTACK_COMMIT"
  [[ -z $(git -C "$FF_PATH" status --porcelain) ]] || die "F-Stack at $FF_PATH has local changes"
  log "F-Stack is commit $FSTACK_COMMIT"
}

step_patch() {
  local patches p
  patches=("$PATCH_DIR"/*.patch)
  [[ -f ${patches[0]} ]] || die "no patches in $PATCH_DIR"
  for p in "${patches[@]}"; do
    log "applying $p"
    # --fuzz=0: a context that does not match must stop the build, not land somewhere else.
    patch -d "$FF_PATH" -p1 --fuzz=0 --forward --batch <"$p"
  done
  restore_kernel_guard
}

# F-Stack commented out DPDK's platform guard in dpdk/kernel/meson.build, so kernel/linux is
# always configured and `meson setup` runs `make -sC /lib/modules/<uname -r>/build
# kernelversion` (check: true), failing without kernel headers whatever enable_kmods says.
# Put the guard back as enable_kmods: F-Stack's igb_uio is still built when asked for.
restore_kernel_guard() {
  local f=$FF_PATH/dpdk/kernel/meson.build
  [[ -f $f ]] || die "$f is missing"
  if ! awk -v guard="if get_option('enable_kmods')" '
    state == 2 && /^#endif[ \t]*$/ { print guard; print body; print "endif"; state = 0; done++; next }
    state == 2 { exit 3 }
    state == 1 && /^[ \t]*subdir\(exec_env\)[ \t]*$/ { body = $0; state = 2; next }
    state == 1 { exit 3 }
    /^#if is_freebsd[ \t]*$/ { state = 1; next }
    { print }
    END { if (done != 1 || state != 0) exit 3 }
  ' "$f" >"$f.guarded"; then
    rm -f "$f.guarded"
    die "$f does not hold the commented-out guard of F-Stack v1.25 ('#if is_freebsd', 'subdir(exec_env)', '#endif'): upstream changed; check that meson setup passes without kernel headers and update restore_kernel_guard"
  fi
  mv "$f.guarded" "$f"
  log "restored the kernel module guard in dpdk/kernel/meson.build"
}

step_dpdk() (
  local drivers libs
  cd "$FF_PATH/dpdk"
  drivers=$(
    IFS=,
    echo "${DPDK_DRIVERS[*]}"
  )
  libs=$(
    IFS=,
    echo "${DPDK_LIBS[*]}"
  )
  # generic: -march=native would tie the image to CPUs like the build machine's.
  # enable_drivers: DPDK is linked statically into fstack, every tool and every shim; all of its
  # ~200 drivers made each of them 29 MB and pulled in libatomic (net/sfc).
  meson setup -Dplatform=generic -Denable_kmods=false -Dtests=false -Ddisable_apps='*' \
    -Denable_drivers="$drivers" -Denable_libs="$libs" build
  ninja -C build -j "$JOBS"
  ninja -C build install
)

step_lib() (
  cd "$FF_PATH/lib"
  make -j"$JOBS" "${LIB_MAKE_VARS[@]}"
  # Headers and libfstack.a for anything else built in this stage; it also writes
  # /etc/f-stack.conf, which stays in the build stage.
  make install "${LIB_MAKE_VARS[@]}" PREFIX="$LIB_PREFIX"
)

# tools/Makefile's own loop keeps only the last subdirectory's status, so a broken tool would
# pass: build each subdirectory here, stop at the first failure, then check every binary.
step_tools() (
  local subdirs d t
  cd "$FF_PATH/tools"
  # shellcheck disable=SC2016 # $(SUBDIRS) is make's, not the shell's
  subdirs=$(printf 'kfs-subdirs: ; @echo $(SUBDIRS)\n' | make -s --no-print-directory -f Makefile -f - kfs-subdirs)
  [[ -n $subdirs ]] || die "tools/Makefile lists no SUBDIRS"
  for d in $subdirs; do
    if is_skipped_tool "$d"; then
      log "tools: skipping $d (not shipped: see TOOLS_SKIPPED)"
      continue
    fi
    log "tools: building $d"
    make -C "$d" --no-print-directory -j"$JOBS" all
  done
  for t in "${FSTACK_TOOLS[@]}"; do
    [[ -f sbin/$t && -x sbin/$t ]] || die "tools: sbin/$t was not built"
  done
)

is_skipped_tool() {
  local s
  for s in "${TOOLS_SKIPPED[@]}"; do [[ $1 == "$s" ]] && return 0; done
  return 1
}

# The adapter in each shim mode. Only the two real targets: `all` adds examples that link
# -lff_syscall without depending on it, and race it under -j.
step_adapter() (
  local entry words mode
  cd "$FF_PATH/adapter/syscall"
  for entry in "${SHIM_MODES[@]}"; do
    read -ra words <<<"$entry"
    mode=${words[0]}
    log "adapter: $mode ${words[*]:1}"
    make clean >/dev/null
    make -j"$JOBS" "${words[@]:1}" fstack libff_syscall.so
    install -d "$OUT/shim/$mode"
    install -m 0755 fstack libff_syscall.so "$OUT/shim/$mode/"
  done
)

# Upstream's `make install` of tools is not used: it needs PREFIX_BIN to exist, copies sbin/
# whole (a .gitignore included) and links ff_ngctl to nothing.
step_install() {
  local t entry
  install -d "$OUT/tools"
  for t in "${FSTACK_TOOLS[@]}"; do
    install -m 0755 "$FF_PATH/tools/sbin/$t" "$OUT/tools/$t"
  done
  for entry in "${SHIM_MODES[@]}"; do
    for t in fstack libff_syscall.so; do
      [[ -f $OUT/shim/${entry%% *}/$t ]] || die "install: $OUT/shim/${entry%% *}/$t is missing; run the adapter step"
    done
  done
  log "installed: $OUT/tools (${FSTACK_TOOLS[*]}), $OUT/shim (${#SHIM_MODES[@]} modes)"
}

# For the image's last stage: a library the build stage had and the runtime lacks (libatomic
# from DPDK's net/sfc, measured) would only show when the dataplane starts.
step_check_libs() {
  local f out n=0 bad=0
  (($# > 0)) || die "check-libs needs directories"
  while IFS= read -r -d '' f; do
    n=$((n + 1))
    out=$(ldd "$f" 2>&1) || true # static binaries and scripts: "not a dynamic executable"
    if grep -q 'not found' <<<"$out"; then
      log "$f: $(grep 'not found' <<<"$out" | tr -s ' \t\n' ' ')"
      bad=1
    fi
  done < <(find "$@" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0)
  ((n > 0)) || die "check-libs: no binaries under $*"
  ((bad == 0)) || die "check-libs: libraries missing (install their packages in the image's last stage)"
  log "check-libs: every library of $n files resolves"
}

main() {
  local step
  (($# > 0)) || die "usage: build-fstack.sh STEP... (steps: ${BUILD_STEPS[*]}, all, verify-pin, steps, check-libs DIR...)"
  case $1 in
  check-libs)
    shift
    step_check_libs "$@"
    return
    ;;
  all) set -- "${BUILD_STEPS[@]}" ;;
  esac
  for step; do
    case $step in
    fetch | patch | dpdk | lib | tools | adapter | install) "step_$step" ;;
    verify-pin) step_verify_pin ;;
    steps) printf '%s\n' "${BUILD_STEPS[@]}" ;;
    *) die "unknown step '$step' (steps: ${BUILD_STEPS[*]}, all, verify-pin, steps, check-libs DIR...)" ;;
    esac
  done
}

main "$@"
