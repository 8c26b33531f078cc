#!/usr/bin/env bash
# Builds the dataplane stand-in image as an OCI tarball without a container daemon (docs/local-cluster.md,
# "Images without a registry"). F-Stack cannot be built here, so the stand-in carries Debian's
# DPDK and runs dpdk-testpmd under the supervisor in program mode, with the EAL arguments F-Stack
# would build from the rendered config.ini. The Debian rootfs is cached under .cache/; a rebuild
# after a supervisor change only repacks.
#   output: .cache/images/dataplane-standin.tar, to import as localhost/kube-fstack/dataplane-standin:dev
#   (ctr -n k8s.io images import --base-name localhost/kube-fstack/dataplane-standin <tar>)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib/image.sh
source hack/lib/image.sh

IMAGE_NAME=localhost/kube-fstack/dataplane-standin
TAG=dev
CACHE=$PWD/.cache
ROOTFS=$CACHE/dataplane-standin/rootfs
WORK=$CACHE/dataplane-standin/work
OUT=$CACHE/images/dataplane-standin.oci.tar
# What the stand-in's supervisor starts: DPDK's own programs, linked the same way for the
# primary and any secondary (docs/local-cluster.md: mixed builds exchange garbage).
DPDK_PACKAGES=(dpdk-dev librte-net-virtio23 librte-mempool-ring23 librte-net-null23)
APT_OPTS=(-o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)

need() {
  command -v "$1" >/dev/null && return
  echo "image-dataplane-standin: installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install "$2"
}

build_rootfs() {
  [ -f "$ROOTFS/.complete" ] && { echo "rootfs: cached at $ROOTFS"; return; }
  rm -rf "$ROOTFS" && mkdir -p "$ROOTFS"
  echo "rootfs: debootstrap bookworm (about 1-2 min)"
  debootstrap --variant=minbase bookworm "$ROOTFS" "$(debian_mirror)" >"$CACHE/dataplane-standin/debootstrap.log"
  mount -t proc proc "$ROOTFS/proc"
  trap 'umount "$ROOTFS/proc" 2>/dev/null || true' EXIT
  echo "rootfs: apt-get install ${DPDK_PACKAGES[*]}"
  chroot "$ROOTFS" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install "${DPDK_PACKAGES[@]}" \
    >"$CACHE/dataplane-standin/apt.log"
  chroot "$ROOTFS" apt-get clean
  umount "$ROOTFS/proc"; trap - EXIT
  # Trim what a runtime never reads.
  rm -rf "$ROOTFS"/usr/share/{doc,man,info,locale} "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/include
  touch "$ROOTFS/.complete"
}

build_overlay() {
  rm -rf "$WORK/overlay" && mkdir -p "$WORK/overlay/usr/local/bin" "$WORK/overlay/opt/kube-fstack/shim" \
    "$WORK/overlay/etc/kube-fstack/podinfo" "$WORK/overlay/etc/f-stack" "$WORK/overlay/dev/hugepages"
  # The stand-in's build of the supervisor: the product's supervisor code plus the program mode,
  # PCI and contexts stand-ins below (dataplane-image/standin/cmd/fstack-supervisor), which the
  # real image's binary does not have.
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/overlay/usr/local/bin/fstack-supervisor" \
    ./dataplane-image/standin/cmd/fstack-supervisor
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/overlay/usr/local/bin/fstack-tool" \
    ./dataplane-image/cmd/fstack-tool
  # F-Stack's tools are stand-ins here (dataplane-image/standin/tools), linked as in the real image.
  dataplane-image/standin/tools/build.sh "$WORK/overlay/usr/local/bin/f-stack"
  local t
  for t in "$WORK"/overlay/usr/local/bin/f-stack/*; do ln -s fstack-tool "$WORK/overlay/usr/local/bin/ff_$(basename "$t")"; done
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/overlay/opt/kube-fstack/shim/fstack-launcher" \
    ./dataplane-image/cmd/fstack-launcher
  # The stand-in of a program linked with libfstack (a StackInstance's spec.program, mode
  # PerProcess): testpmd with the EAL arguments F-Stack builds from config.ini for each process.
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/overlay/usr/local/bin/fstack-standin-program" \
    ./dataplane-image/standin/native/cmd/fstack-standin-program
  # ... and of F-Stack's Nginx (mode Nginx): a master that forks one such testpmd per worker.
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/overlay/usr/local/bin/fstack-standin-nginx" \
    ./dataplane-image/standin/native/cmd/fstack-standin-nginx
  # The stand-in shim (dataplane-image/standin/shim): not F-Stack, but the behaviours of F-Stack's
  # shim that kube-fstack must handle, built for each mode directory as F-Stack's is (the
  # multi-sc builds' fork hook differs). It announces itself and its mode in the app's log, and
  # the shim dir says so too.
  local mode
  for mode in kernel-event+multi-sc kernel-event multi-sc pipeline thread-socket multi-sc+polling; do
    mkdir -p "$WORK/overlay/opt/kube-fstack/shim/$mode"
    dataplane-image/standin/shim/build.sh "$WORK/overlay/opt/kube-fstack/shim/$mode/libff_syscall.so" "$mode"
  done
  # Like F-Stack's, the stand-in shim needs libnuma and libatomic, which the local cluster's nginx
  # image lacks: it carries them exactly as the real image does.
  need patchelf patchelf
  dataplane-image/build/package.sh shim-libs "$WORK/overlay/opt/kube-fstack/shim"
  dataplane-image/build/package.sh check-shim "$WORK/overlay/opt/kube-fstack/shim"
  # The probe agent the supervisor runs under the shim for the app probes; the same source as
  # the real image's, built here with the host's gcc (the rootfs is the same Debian release).
  gcc -O2 -Wall -Wextra -Werror -o "$WORK/overlay/usr/local/bin/fstack-probe-agent" \
    dataplane-image/probe-agent/*.c
  echo "stand-in image: libff_syscall.so is kube-fstack's stand-in (dataplane-image/standin/shim), not F-Stack" \
    >"$WORK/overlay/opt/kube-fstack/shim/README.standin"
}

# The stand-in's supervisor arguments (flags only its build has): testpmd as every F-Stack process (one queue pair each,
# as F-Stack's processes), held back until the primary's mbuf pool exists. The shim library of
# every mode is the stand-in's, so the supervisor requires one, as with the real image.
# The primary answers pings (icmpecho); secondaries only receive, because testpmd's icmpecho
# mode polls every queue in every process, and two processes on one virtio queue corrupt it.
# In the other modes process k polls only its own queue, as an F-Stack process does.
# A PCI device DPDK cannot probe here (the e2e suite's device plugin hands out addresses of no
# device) becomes a net_null port, and the supervisor logs it; F-Stack's image never does this.
# --no-lsc-interrupt makes testpmd as deaf to its link as F-Stack, which enables no
# link-status interrupt and reads the link only at start: with the interrupt, a vhost-user
# server port reconnects to a restarted OVS by itself, and the stand-in would hide that F-Stack
# does not (the supervisor's link watch is what reconnects it, for both).
# The readiness check is the entrypoint's, as the real image's is: a native program's pod
# (spec.program) replaces CMD with --native and its own command, and testpmd, whichever way it
# is started, creates mb_pool_0 before a secondary may attach.
ENTRY_ARGS=(--ready-telemetry=/mempool/list~mb_pool_0)
CMD=(--program-mode --program=/usr/bin/dpdk-testpmd --program-lcores-per-proc=2 --standin-pci-vdev=net_null
  --shim-contexts=standin
  --primary-args=--total-num-mbufs=8192 --primary-args=--forward-mode=icmpecho --secondary-args=--forward-mode=rxonly)
for a in '--rxq={procs}' '--txq={procs}' '--num-procs={procs}' '--proc-id={proc}' --auto-start --no-lsc-interrupt; do
  CMD+=("--primary-args=$a" "--secondary-args=$a")
done

build_layout() {
  pack --label io.kubefstack.fstack-version=none --label io.kubefstack.flavor=KubeFStack \
    --label io.kubefstack.shim-modes=none --label io.kubefstack.standin=dpdk-testpmd --entry-arg "${ENTRY_ARGS[0]}" \
    "$OUT" "$IMAGE_NAME:$TAG" /usr/local/bin/fstack-supervisor "$ROOTFS" "$WORK/overlay" -- "${CMD[@]}"
}

need debootstrap debootstrap
need buildah buildah
need gcc gcc
mkdir -p "$CACHE/dataplane-standin"
build_rootfs
build_overlay
# The same overlay (supervisor, launcher) and arguments as the tarball holds: keep it, so the
# local cluster does not re-import an identical image.
sum="$( (cd "$WORK/overlay" && find . -type f -print0 | sort -z | xargs -0 cat; printf '%s\n' "${ENTRY_ARGS[@]}" "${CMD[@]}") | sha256sum | cut -c1-16)"
if [ -f "$OUT" ] && [ "$(cat "${OUT%.tar}.sum" 2>/dev/null)" = "$sum" ]; then
  echo "image: $OUT is up to date"; exit 0
fi
build_layout
echo "$sum" >"${OUT%.tar}.sum"
echo "image: $OUT ($(du -h "$OUT" | cut -f1)) as $IMAGE_NAME:$TAG"
