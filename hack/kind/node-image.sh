#!/usr/bin/env bash
# Builds kube-fstack's kind node image here, where no node or base image can be pulled
# (docs/developer/multinode.md): the Debian minbase rootfs the other images use, systemd,
# containerd, runc and OVS-DPDK from Debian, Kubernetes built from source (hack/k8s-binaries.sh:
# kubeadm, kubelet, kubectl), the CNI reference plugins, and, as container image archives the
# node's containerd holds from the start, what kubeadm runs: the control plane, etcd (Debian's), kube-proxy and the
# pause image. kind's own node images carry the same things; this one is built with buildah.
#
#   hack/kind/node-image.sh     prints the image name; cached in buildah's store by its inputs
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/../cluster/lib.sh"
# shellcheck source=hack/lib/image.sh
source "$ROOT/hack/lib/image.sh"

ETCD_TAG=3.4.23-0   # Debian bookworm's etcd-server, which kube-apiserver 1.35 works with (docs/developer/multinode.md)
NODE_IMAGE="localhost/kube-fstack/kind-node:$K8S_VERSION"
WORK="$CACHE/kind-node"
K8S_BINS=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
# librte-mempool-ring23: DPDK's ring mempool driver, a plugin Debian's OVS-DPDK only recommends;
# without it OVS cannot make a mempool for any port ("Invalid argument").
NODE_PACKAGES=(systemd systemd-sysv dbus containerd runc iptables conntrack ethtool socat iproute2 kmod
  util-linux mount procps ca-certificates curl openvswitch-switch-dpdk librte-mempool-ring23 etcd-server)

# The inputs the image is built from: when they match the label of the image in the store,
# nothing is rebuilt.
inputs_key() {
  {
    cat "$0" "$HERE"/node/*
    echo "${NODE_PACKAGES[*]} $ETCD_TAG $CNI_PLUGINS_VERSION"
    for b in "${K8S_BINS[@]}"; do stat -c '%s %Y' "$K8S_BIN/$b"; done
  } | sha256sum | cut -c1-16
}

# apt_in ROOTFS LOG PKG...: Debian packages installed into a chroot, no daemon started.
apt_in() {
  local r="$1" logf="$2"; shift 2
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d" && chmod +x "$r/usr/sbin/policy-rc.d"
  mount -t proc proc "$r/proc"
  local rc=0
  { chroot "$r" apt-get -o DPkg::Lock::Timeout=600 update -qq &&
    chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -qq \
      --no-install-recommends install "$@" && chroot "$r" apt-get clean; } >"$logf" 2>&1 || rc=$?
  umount "$r/proc"
  rm -f "$r/usr/sbin/policy-rc.d"
  rm -rf "$r"/var/lib/apt/lists/* "$r"/usr/share/{doc,man,info,locale}
  [ $rc -eq 0 ] || die "apt-get install $* in $r failed, see $logf"
}

# ctr_image REF ROOTFS ENTRYPOINT: one image as a docker-archive under WORK/images (its
# RepoTags carry REF, so the node's `ctr images import` names it without being told).
ctr_image() {
  local ref="$1" rootfs="$2" entry="$3" tar
  tar="$WORK/images/$(echo "${ref%%:*}" | tr '/' '_').tar"
  pack - "$ref" "$entry" "$rootfs"
  rm -f "$tar"
  buildah push -q "$ref" "docker-archive:$tar:$ref" >/dev/null || die "exporting $ref failed"
}

# A rootfs of just BINARY at /usr/local/bin (the control plane's binaries and etcd are
# dynamically linked against glibc only) and the C library they need.
mini_rootfs() {
  local r="$1" bin="$2"
  rm -rf "$r" && mkdir -p "$r/usr/local/bin" "$r/lib/x86_64-linux-gnu" "$r/lib64" "$r/etc" "$r/tmp" "$r/var/lib"
  chmod 1777 "$r/tmp"
  cp "$bin" "$r/usr/local/bin/"
  cp -L "$IMAGE_BASE_ROOTFS/lib/x86_64-linux-gnu/libc.so.6" "$r/lib/x86_64-linux-gnu/"
  cp -L "$IMAGE_BASE_ROOTFS/lib64/ld-linux-x86-64.so.2" "$r/lib64/"
  cp "$IMAGE_BASE_ROOTFS"/etc/{passwd,group,nsswitch.conf} "$r/etc/"
}

# preload ROOTFS: the image archives imported into the node's containerd store (k8s.io, as the
# CRI reads it) by a containerd of the same Debian version run on the host against the rootfs's
# /var/lib/containerd: a node then boots with them, as kind's node images do. (Importing at boot
# took 13 s per node with three nodes at once, longer than kind waits for systemd.)
preload() {
  local r="$1" state=/run/kube-fstack-node-image pid tar
  rm -rf "$state" && mkdir -p "$state"
  cat >"$state/config.toml" <<CFG
version = 2
root = "$r/var/lib/containerd"
state = "$state/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$state/containerd.sock"
CFG
  containerd --config "$state/config.toml" >"$WORK/containerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do ctr -a "$state/containerd.sock" version >/dev/null 2>&1 && break; sleep 0.2; done
  for tar in "$WORK"/images/*.tar; do
    ctr -a "$state/containerd.sock" -n k8s.io images import --all-platforms "$tar" >>"$WORK/import.log" 2>&1 \
      || { kill "$pid"; die "importing $tar into the node's containerd failed, see $WORK/import.log"; }
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$state"
}

build() {
  local key r images
  key="$(inputs_key)"
  if [ "$(buildah inspect --type image --format '{{index .ImageAnnotations "kube-fstack.key"}}{{index .OCIv1.Config.Labels "kube-fstack.key"}}' "$NODE_IMAGE" 2>/dev/null)" = "$key" ]; then
    echo "$NODE_IMAGE"; return 0
  fi
  need_buildah
  "$ROOT/hack/k8s-binaries.sh" -v "$K8S_VERSION" "${K8S_BINS[@]}" >&2
  "$HERE/../cluster/images.sh" build >&2   # the pause image
  debootstrap_base
  rm -rf "$WORK" && mkdir -p "$WORK"

  # kube-proxy runs iptables and conntrack from its own image.
  log "kind node image: kube-proxy's rootfs (apt: iptables, conntrack)"
  r="$WORK/proxy" && cp -a "$IMAGE_BASE_ROOTFS" "$r"
  apt_in "$r" "$WORK/proxy-apt.log" iptables conntrack iproute2
  cp "$K8S_BIN/kube-proxy" "$r/usr/local/bin/"

  log "kind node image: the node's rootfs (apt: ${NODE_PACKAGES[*]})"
  r="$WORK/node" && cp -a "$IMAGE_BASE_ROOTFS" "$r"
  apt_in "$r" "$WORK/node-apt.log" "${NODE_PACKAGES[@]}"
  # OVS runs as kube-fstack-ovs.service, on the node's own hugepages; Debian's units would start
  # the kernel-datapath OVS instead. etcd runs as kubeadm's static pod, not as Debian's service.
  for u in openvswitch-switch ovs-vswitchd ovsdb-server ovs-record-hostname etcd dpdk e2scrub_reap getty@tty1 systemd-udevd; do
    chroot "$r" systemctl mask "$u.service" >/dev/null 2>&1 || true
  done
  mkdir -p "$r/usr/bin" "$r/opt/cni/bin" "$r/etc/containerd" "$r/etc/systemd/system/kubelet.service.d" \
    "$WORK/images" "$r/kind/manifests" "$r/var/log/openvswitch" "$r/etc/kubernetes/manifests"
  for b in kubeadm kubelet kubectl; do cp "$K8S_BIN/$b" "$r/usr/bin/"; done
  [ -x "$CACHE/cni-plugins-$CNI_PLUGINS_VERSION/portmap" ] || {
    for p in main/bridge ipam/host-local main/loopback meta/portmap; do
      GOBIN="$CACHE/cni-plugins-$CNI_PLUGINS_VERSION" go install "github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION"
    done
  }
  cp "$CACHE/cni-plugins-$CNI_PLUGINS_VERSION"/* "$r/opt/cni/bin/"
  install -m 0755 "$HERE/node/entrypoint" "$r/usr/local/bin/entrypoint"
  install -m 0755 "$HERE/node/kube-fstack-ovs" "$r/usr/local/bin/kube-fstack-ovs"
  install -m 0644 "$HERE/node/config.toml" "$r/etc/containerd/config.toml"
  install -m 0644 "$HERE/node/kubelet.service" "$HERE/node/kube-fstack-ovs.service" "$r/etc/systemd/system/"
  install -m 0644 "$HERE/node/10-kubeadm.conf" "$r/etc/systemd/system/kubelet.service.d/"
  # kubeadm probes etcd at /livez and /readyz, which etcd 3.4 does not serve: its /health instead
  # (hack/kind/multinode.yaml points kubeadm at this patch directory).
  mkdir -p "$r/kind/patches" && install -m 0644 "$HERE/node/etcd+json.json" "$r/kind/patches/"
  chroot "$r" systemctl enable kubelet.service containerd.service >/dev/null 2>&1
  echo "$K8S_VERSION" >"$r/kind/version"
  : >"$r/etc/machine-id"

  images="$WORK/mini"
  log "kind node image: control-plane images"
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    mini_rootfs "$images" "$K8S_BIN/$b"
    ctr_image "registry.k8s.io/$b:$K8S_VERSION" "$images" "/usr/local/bin/$b"
  done
  mini_rootfs "$images" "$r/usr/bin/etcd"
  ctr_image "registry.k8s.io/etcd:$ETCD_TAG" "$images" /usr/local/bin/etcd
  ctr_image "registry.k8s.io/kube-proxy:$K8S_VERSION" "$WORK/proxy" /usr/local/bin/kube-proxy
  rm -rf "$images" "$WORK/proxy"
  # images.sh left the pause image in buildah's store as well as in its archive.
  buildah push -q localhost/pause:3.10 "docker-archive:$WORK/images/pause.tar:localhost/pause:3.10" >/dev/null \
    || die "exporting the pause image failed"
  rm -f "$r/usr/bin/etcd"   # only the image's copy is run
  preload "$r"

  log "kind node image: packing $NODE_IMAGE"
  local ctr old
  old="$(buildah images -q --noheading "$NODE_IMAGE" 2>/dev/null || true)"
  ctr="$(buildah from --pull=never scratch)"
  pack_into "$ctr" "$r" || die "copying the node rootfs failed"
  buildah config --env container=docker --stop-signal SIGRTMIN+3 --label "kube-fstack.key=$key" \
    --entrypoint '["/usr/local/bin/entrypoint", "/sbin/init"]' --cmd '[]' "$ctr"
  buildah commit -q --rm "$ctr" "$NODE_IMAGE" >/dev/null || die "committing $NODE_IMAGE failed"
  drop_replaced "$old" "$NODE_IMAGE"
  rm -rf "$WORK"
  echo "$NODE_IMAGE"
}

build
