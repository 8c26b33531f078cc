#!/usr/bin/env bash
# Builds F-Stack's own applications against the libfstack that build-fstack.sh built in the same
# stage (same pinned source, same DPDK, same patches), for the image targets that run them as a
# StackInstance's native program (spec.program):
#   build-apps.sh nginx      F-Stack's Nginx (app/nginx-1.28.0) into $OUT/nginx-root
#   build-apps.sh examples   F-Stack's example programs (helloworld, helloworld_epoll) into $OUT/examples
# A script of its own, like package.sh: changing it keeps the 25-minute F-Stack build before it
# cached. NGINX_HTTP3=on (the default) adds TLS, HTTP/2 and HTTP/3; with Debian's OpenSSL 3.0,
# Nginx's configure takes its OpenSSL compatibility layer for QUIC (no early data), as
# dataplane-image/build/NOTES-apps.md records from the real build.
set -euo pipefail

export FF_PATH=${FF_PATH:-/src/f-stack}
export PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-/usr/local/lib/x86_64-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:/usr/lib/pkgconfig}
OUT=${OUT:-/out}
JOBS=${JOBS:-$(nproc)}
NGINX_DIR=${NGINX_DIR:-app/nginx-1.28.0}
# F-Stack's Nginx guide installs under this prefix; the image keeps it so F-Stack's documents apply.
NGINX_PREFIX=/usr/local/nginx_fstack
NGINX_HTTP3=${NGINX_HTTP3:-on}
EXAMPLES=(helloworld helloworld_epoll)

log() { printf '[build-apps] %s\n' "$*" >&2; }
die() {
  printf '[build-apps] ERROR: %s\n' "$*" >&2
  exit 1
}

check_http3() {
  [[ $NGINX_HTTP3 == on || $NGINX_HTTP3 == off ]] || die "NGINX_HTTP3=$NGINX_HTTP3: want on (TLS, HTTP/2 and HTTP/3) or off (plain HTTP only)"
}

# nginx_configure_args prints configure's arguments, one a line. Not --with-threads: F-Stack's
# event layer makes ngx_notify an inline function, and gcc 12 fails ngx_thread_pool.c's NULL check
# of it (-Werror=address, measured on v1.25).
nginx_configure_args() {
  printf '%s\n' "--prefix=$NGINX_PREFIX" --with-ff_module --with-http_stub_status_module
  [[ $NGINX_HTTP3 == off ]] || printf '%s\n' --with-http_ssl_module --with-http_v2_module --with-http_v3_module
}

step_nginx() (
  local args
  check_http3
  [[ -f $FF_PATH/lib/libfstack.a ]] || die "$FF_PATH/lib/libfstack.a is missing: run build-fstack.sh lib first"
  cd "$FF_PATH/$NGINX_DIR" || die "$FF_PATH/$NGINX_DIR: no F-Stack Nginx there (F-Stack v1.25 ships app/nginx-1.28.0)"
  mapfile -t args < <(nginx_configure_args)
  log "nginx: ./configure ${args[*]}"
  ./configure "${args[@]}"
  make -j"$JOBS"
  make install DESTDIR="$OUT/nginx-root"
  [[ -x $OUT/nginx-root$NGINX_PREFIX/sbin/nginx ]] || die "nginx: $NGINX_PREFIX/sbin/nginx was not installed"
)

step_examples() (
  local e
  [[ -f $FF_PATH/lib/libfstack.a ]] || die "$FF_PATH/lib/libfstack.a is missing: run build-fstack.sh lib first"
  cd "$FF_PATH/example"
  make
  install -d "$OUT/examples"
  for e in "${EXAMPLES[@]}"; do
    [[ -x $e ]] || die "examples: $e was not built"
    install -m 0755 "$e" "$OUT/examples/$e"
  done
)

main() {
  (($# > 0)) || die "usage: build-apps.sh STEP... (nginx, examples, nginx-configure-args)"
  local step
  for step; do
    case $step in
    nginx | examples) "step_$step" ;;
    nginx-configure-args) check_http3 && nginx_configure_args ;;
    *) die "unknown step '$step' (nginx, examples, nginx-configure-args)" ;;
    esac
  done
}

main "$@"
