#!/usr/bin/env bash
# Turns what the F-Stack build produced into what the dataplane image ships, and checks it:
#   package.sh strip PATH...        strip every ELF file under PATH (debug info and local symbols)
#   package.sh shim-libs SHIMROOT   give SHIMROOT/<mode>/libff_syscall.so its own libraries
#   package.sh check-shim SHIMROOT  every shim finds each non-glibc library in its own lib/
#   package.sh link-duplicates DIR  hard-link files of DIR with the same content (one copy in a layer)
#   package.sh notices FF_PATH OUT [nginx]
#                                   F-Stack's, DPDK's and the FreeBSD sources' license notices (and
#                                   Nginx's with nginx) from the F-Stack tree into OUT
#   package.sh debian-notices OUT   list every installed Debian package with its copyright file,
#                                   failing if one has none (Debian ships each license there)
#   package.sh sbom FF_PATH OUT [nginx]
#                                   an SPDX document (OUT/f-stack.spdx.json, or OUT/nginx.spdx.json
#                                   with nginx) naming what the image builds from source at its
#                                   pinned version: F-Stack (FSTACK_VERSION, FSTACK_COMMIT) and the
#                                   DPDK it bundles, or F-Stack's Nginx; release.sh's syft merges it
# The Dockerfile's package stage runs the first two and its last stage the third; the stand-in
# image (hack/image-dataplane-standin.sh) runs the same on its stand-in shim. This is a script of
# its own, not a step of build-fstack.sh, so that changing it does not invalidate the cached
# 25-minute F-Stack build before it.
#
# Why the shim carries libraries: the app container loads libff_syscall.so with LD_PRELOAD, and a
# missing dependency of a preloaded object is fatal to glibc's loader (exit 127 for every program).
# F-Stack's shim needs libnuma, libcrypto, libz (and, with DPDK's net/sfc, libatomic), which stock
# app images such as Debian's nginx lack. So SHIMROOT/lib holds the shim's non-glibc libraries,
# each <mode>/lib links to it, and every shim and library has DT_RUNPATH $ORIGIN/lib or $ORIGIN:
# in the pod the supervisor copies libff_syscall.so and lib/ side by side into the shim volume.
# A library the app itself already loaded (the app's own libcrypto.so.3) is found by its soname
# first and used; ours serve only what the app image lacks. glibc itself (libc, libm, ...) is
# never carried: it must be the app's own, so the shim needs a glibc-based app image.
set -euo pipefail

SHIM=libff_syscall.so
# glibc's own objects: the app's loader provides them, and mixing two glibcs breaks a process.
GLIBC_SONAMES=(linux-vdso.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libc.so.6 libm.so.6
  libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 libutil.so.1 libanl.so.1 libmvec.so.1)

log() { printf '[package] %s\n' "$*" >&2; }
die() {
  printf '[package] ERROR: %s\n' "$*" >&2
  exit 1
}

is_elf() { [[ -f $1 && ! -L $1 && $(head -c4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }

is_glibc() {
  local s
  for s in "${GLIBC_SONAMES[@]}"; do [[ $1 == "$s" ]] && return 0; done
  return 1
}

# deps FILE: "soname<TAB>path" of each library the loader resolves for FILE, glibc's left out.
# A library the loader cannot find is printed with path "not found".
deps() {
  local out
  out=$(ldd "$1" 2>&1) || die "ldd $1 failed: $out"
  awk '$2 == "=>" { p = ($3 == "not" ? "not found" : $3); print $1 "\t" p }' <<<"$out" |
    while IFS=$'\t' read -r so path; do
      is_glibc "$so" || printf '%s\t%s\n' "$so" "$path"
    done
}

cmd_strip() {
  local f n=0 before=0 after=0
  (($# > 0)) || die "strip needs paths"
  while IFS= read -r -d '' f; do
    is_elf "$f" || continue
    before=$((before + $(stat -c %s "$f")))
    strip --strip-unneeded "$f"
    after=$((after + $(stat -c %s "$f")))
    n=$((n + 1))
  done < <(find "$@" -type f -print0)
  ((n > 0)) || die "strip: no ELF file under $*"
  log "strip: $n files, $((before / 1048576)) MiB -> $((after / 1048576)) MiB"
}

cmd_shim_libs() {
  local root=${1:?shim-libs needs SHIMROOT} shims=() s so path n=0
  shopt -s nullglob
  shims=("$root"/*/"$SHIM")
  ((${#shims[@]} > 0)) || die "shim-libs: no $root/<mode>/$SHIM"
  install -d "$root/lib"
  for s in "${shims[@]}"; do
    while IFS=$'\t' read -r so path; do
      [[ $path != "not found" ]] || die "shim-libs: $s needs $so, which this build stage cannot find"
      [[ -e $root/lib/$so ]] && continue
      install -m 0644 "$(readlink -f "$path")" "$root/lib/$so"
      n=$((n + 1))
    done < <(deps "$s")
  done
  # The carried libraries' own dependencies (none today but glibc) are carried too, and each finds
  # its siblings through $ORIGIN: DT_RUNPATH applies to an object's direct dependencies only.
  local more=1
  while ((more)); do
    more=0
    for s in "$root"/lib/*; do
      while IFS=$'\t' read -r so path; do
        [[ -e $root/lib/$so ]] && continue
        [[ $path != "not found" ]] || die "shim-libs: $s needs $so, which this build stage cannot find"
        install -m 0644 "$(readlink -f "$path")" "$root/lib/$so"
        n=$((n + 1)) more=1
      done < <(deps "$s")
    done
  done
  # shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
  for s in "$root"/lib/*; do patchelf --set-rpath '$ORIGIN' "$s"; done
  for s in "${shims[@]}"; do
    # shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
    patchelf --set-rpath '$ORIGIN/lib' "$s"
    ln -sfn ../lib "$(dirname "$s")/lib"
  done
  log "shim-libs: ${#shims[@]} shims; $n libraries in $root/lib: $(cd "$root/lib" && echo *)"
}

# The proof that counts is the loader's: with the image's own copies of these libraries installed
# (the dataplane needs them), a shim whose run path were wrong would resolve them from /usr/lib and
# pass any other check, then fail in an app image without them.
cmd_check_shim() {
  local root=${1:?check-shim needs SHIMROOT} s so path lib bad=0
  shopt -s nullglob
  local shims=("$root"/*/"$SHIM")
  ((${#shims[@]} > 0)) || die "check-shim: no $root/<mode>/$SHIM"
  lib=$(readlink -f "$root/lib")
  for s in "${shims[@]}"; do
    while IFS=$'\t' read -r so path; do
      if [[ $path == "not found" || $(readlink -f "$path") != "$lib"/* ]]; then
        log "$s: $so resolves to '$path', not to its own lib/: an app image without $so could not load the shim"
        bad=1
      fi
    done < <(deps "$s")
  done
  ((bad == 0)) || die "check-shim: a shim depends on a library it does not carry (run shim-libs)"
  log "check-shim: ${#shims[@]} shims load every non-glibc library from $root/lib ($(du -shL "$lib" | cut -f1))"
}

# Some shim modes build the same fstack binary (the adapter's flags change only the library), and
# each copy is 9 MB: the image keeps one and hard-links the others (a layer stores a link once).
cmd_link_duplicates() {
  local dir=${1:?link-duplicates needs DIR} sum f prev="" first="" n=0
  while read -r sum f; do
    if [[ $sum == "$prev" ]]; then
      ln -f "$first" "$f"
      n=$((n + 1))
    else
      prev=$sum first=$f
    fi
  done < <(find "$dir" -type f -print0 | xargs -0 -r sha256sum | sort)
  log "link-duplicates: $n files in $dir linked to an identical one"
}

# The licenses of what the image ships from F-Stack's tree: F-Stack's LICENSE (which also names
# FreeBSD's, libplebnet's, libuinet's and inih's terms), DPDK's license directory (the libraries
# and drivers are BSD-3-Clause; its GPL kernel modules are never built), and, because the BSD
# licenses ask binary redistributions to reproduce each copyright notice, every distinct
# copyright line of the FreeBSD sources F-Stack compiles, with the clauses they come with.
cmd_notices() {
  local ff=${1:?notices needs FF_PATH} out=${2:?notices needs OUT} app=${3:-}
  local f
  for f in "$ff/LICENSE" "$ff/dpdk/license/bsd-3-clause.txt" "$ff/freebsd"; do
    [[ -e $f ]] || die "notices: $f missing: FF_PATH=$ff is not an F-Stack tree"
  done
  mkdir -p "$out/dpdk"
  cp "$ff/LICENSE" "$out/LICENSE.f-stack"
  cp "$ff"/dpdk/license/* "$out/dpdk/"
  {
    echo "Copyright notices of the FreeBSD sources in F-Stack (freebsd/), each file under the BSD"
    echo "license its header states (BSD-2-Clause, BSD-3-Clause or BSD-4-Clause, whose conditions"
    echo "follow in F-Stack's LICENSE and DPDK's license/ texts beside this file)."
    echo
    grep -rhoE --include='*.[ch]' '[Cc]opyright ?(\([cC]\)|©)? ?[0-9][^*]*' "$ff/freebsd" \
      | sed -E 's/[[:space:]]+$//' | LC_ALL=C sort -u
  } >"$out/freebsd-copyrights.txt"
  case $app in
  "") ;;
  nginx)
    f=$(find "$ff/app" -maxdepth 2 -path '*/nginx-*/LICENSE' | head -1)
    [[ -n $f ]] || die "notices: no $ff/app/nginx-*/LICENSE"
    cp "$f" "$out/LICENSE.nginx" ;;
  *) die "notices: unknown app '$app' (nginx)" ;;
  esac
  log "notices: $(find "$out" -type f | wc -l) files in $out ($(wc -l <"$out/freebsd-copyrights.txt") FreeBSD copyright lines)"
}

# Debian ships each package's license as /usr/share/doc/<package>/copyright (slim images keep
# exactly those files). Lists what is installed and fails on a package without one, so the image
# never ships a package whose license it does not carry.
cmd_debian_notices() {
  local out=${1:?debian-notices needs OUT} pkg ver doc bad=0 installed
  mkdir -p "$(dirname "$out")"
  installed=$(dpkg-query -W -f '${binary:Package} ${Version}\n' | LC_ALL=C sort) || die "debian-notices: dpkg-query failed"
  {
    echo "Debian packages in this image, each under the license in its copyright file."
    while IFS=' ' read -r pkg ver; do
      doc=/usr/share/doc/${pkg%%:*}/copyright
      if [[ ! -f $doc ]]; then
        printf '[package] ERROR: debian-notices: %s %s has no %s\n' "$pkg" "$ver" "$doc" >&2
        bad=1
        continue
      fi
      printf '%s %s %s\n' "$pkg" "$ver" "$doc"
    done <<<"$installed"
  } >"$out"
  ((bad == 0)) || die "debian-notices: packages without a copyright file (above): the image cannot ship their licenses"
  log "debian-notices: $(($(wc -l <"$out") - 1)) packages in $out"
}

# What the image compiles from source is invisible to an SBOM scanner: no package database lists
# it, and F-Stack links DPDK statically into every binary. So the build writes what it compiled as
# a small SPDX document in the image (/usr/share/doc/kube-fstack/sbom/), which syft's
# sbom-cataloger merges into the image's SBOM (release.sh turns it on). The versions come from the
# Dockerfile's ARGs and from the tree, never typed here: F-Stack's from FSTACK_VERSION and
# FSTACK_COMMIT, DPDK's from the bundled tree's VERSION file (which must agree with DPDK_VERSION,
# the image's io.kubefstack.dpdk-version label), Nginx's from F-Stack's app/nginx-<version>.
cmd_sbom() {
  local ff=${1:?sbom needs FF_PATH} out=${2:?sbom needs OUT} app=${3:-} commit=${FSTACK_COMMIT:-} ver=${FSTACK_VERSION:-}
  local dpdk nginx name packages rels created
  [[ $commit =~ ^[0-9a-f]{40}$ ]] || die "sbom: FSTACK_COMMIT='$commit': want the 40-hex commit the image is built from (the Dockerfile's ARG FSTACK_COMMIT)"
  [[ $ver =~ ^v[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || die "sbom: FSTACK_VERSION='$ver': want F-Stack's release, like v1.25 (the Dockerfile's ARG FSTACK_VERSION)"
  created=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%dT%H:%M:%SZ)
  case $app in
  "")
    [[ -n ${DPDK_VERSION:-} ]] || die "sbom: DPDK_VERSION is empty: pass the Dockerfile's ARG DPDK_VERSION (the image's io.kubefstack.dpdk-version label)"
    [[ -f $ff/dpdk/VERSION ]] || die "sbom: $ff/dpdk/VERSION missing: FF_PATH=$ff is not an F-Stack tree with its DPDK"
    dpdk=$(tr -d '[:space:]' <"$ff/dpdk/VERSION")
    [[ $dpdk =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || die "sbom: $ff/dpdk/VERSION says '$dpdk', not a DPDK release like 23.11.0"
    [[ $dpdk == "$DPDK_VERSION" || $dpdk == "$DPDK_VERSION".* ]] ||
      die "sbom: F-Stack's bundled DPDK is $dpdk, but the Dockerfile says DPDK_VERSION=$DPDK_VERSION: set the ARG (and so the label) to the DPDK this F-Stack bundles"
    name="f-stack"
    packages="$(spdx_package f-stack "$ver" "git+https://github.com/F-Stack/f-stack@$commit" NOASSERTION \
      "F-Stack $ver (commit $commit) built from source with kube-fstack's patches (the image's io.kubefstack.patches label)" \
      "pkg:github/F-Stack/f-stack@$commit" "cpe:2.3:a:f-stack:f-stack:${ver#v}:*:*:*:*:*:*:*"),
$(spdx_package dpdk "$dpdk" "git+https://github.com/F-Stack/f-stack@$commit#dpdk" BSD-3-Clause \
      "DPDK as F-Stack bundles it (dpdk/), linked statically into fstack, its tools and every shim" \
      "pkg:generic/dpdk@$dpdk" "cpe:2.3:a:dpdk:data_plane_development_kit:$dpdk:*:*:*:*:*:*:*")"
    rels="$(spdx_rel SPDXRef-DOCUMENT DESCRIBES SPDXRef-Package-f-stack),
$(spdx_rel SPDXRef-Package-f-stack CONTAINS SPDXRef-Package-dpdk)" ;;
  nginx)
    nginx=$(find "$ff/app" -mindepth 1 -maxdepth 1 -type d -name 'nginx-*' -printf '%f\n' 2>/dev/null | sort | tail -1)
    [[ $nginx =~ ^nginx-[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "sbom: no $ff/app/nginx-<version> directory: FF_PATH=$ff is not an F-Stack tree with its Nginx"
    nginx=${nginx#nginx-}
    name=nginx
    packages=$(spdx_package nginx "$nginx" "git+https://github.com/F-Stack/f-stack@$commit#app/nginx-$nginx" BSD-2-Clause \
      "F-Stack's Nginx (app/nginx-$nginx of F-Stack $ver, commit $commit), built against the image's libfstack" \
      "pkg:generic/nginx@$nginx" "cpe:2.3:a:f5:nginx:$nginx:*:*:*:*:*:*:*")
    rels=$(spdx_rel SPDXRef-DOCUMENT DESCRIBES SPDXRef-Package-nginx) ;;
  *) die "sbom: unknown app '$app' (nginx)" ;;
  esac
  mkdir -p "$out"
  {
    echo '{'
    echo '  "spdxVersion": "SPDX-2.3",'
    echo '  "dataLicense": "CC0-1.0",'
    echo '  "SPDXID": "SPDXRef-DOCUMENT",'
    echo "  \"name\": \"kube-fstack-dataplane-$name-built-from-source\","
    echo "  \"documentNamespace\": \"https://github.com/kube-fstack/kube-fstack/spdx/$name/$commit\","
    echo "  \"creationInfo\": {\"created\": \"$created\", \"creators\": [\"Tool: kube-fstack-dataplane-image-build-package.sh\"]},"
    echo '  "packages": ['
    echo "$packages"
    echo '  ],'
    echo '  "relationships": ['
    echo "$rels"
    echo '  ]'
    echo '}'
  } >"$out/$name.spdx.json"
  log "sbom: $out/$name.spdx.json"
}

# spdx_package NAME VERSION WHERE LICENSE COMMENT PURL CPE: one SPDX package as JSON. Every value is
# checked above or fixed text: none holds a quote or a backslash.
spdx_package() {
  printf '    {"name": "%s", "SPDXID": "SPDXRef-Package-%s", "versionInfo": "%s", "downloadLocation": "%s", "filesAnalyzed": false, "licenseConcluded": "NOASSERTION", "licenseDeclared": "%s", "comment": "%s", "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "%s"}, {"referenceCategory": "SECURITY", "referenceType": "cpe23Type", "referenceLocator": "%s"}]}' \
    "$1" "$1" "$2" "$3" "$4" "$5" "$6" "$7"
}

spdx_rel() { printf '    {"spdxElementId": "%s", "relationshipType": "%s", "relatedSpdxElement": "%s"}' "$1" "$2" "$3"; }

main() {
  (($# > 0)) || die "usage: package.sh strip PATH... | shim-libs SHIMROOT | check-shim SHIMROOT | link-duplicates DIR | notices FF_PATH OUT [nginx] | debian-notices OUT | sbom FF_PATH OUT [nginx]"
  local cmd=$1
  shift
  case $cmd in
  strip) cmd_strip "$@" ;;
  shim-libs) cmd_shim_libs "$@" ;;
  check-shim) cmd_check_shim "$@" ;;
  link-duplicates) cmd_link_duplicates "$@" ;;
  notices) cmd_notices "$@" ;;
  debian-notices) cmd_debian_notices "$@" ;;
  sbom) cmd_sbom "$@" ;;
  *) die "unknown command '$cmd' (strip, shim-libs, check-shim, link-duplicates, notices, debian-notices, sbom)" ;;
  esac
}

main "$@"
