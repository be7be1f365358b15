#!/bin/sh
# run.sh BUILD_DIR [CC] [CMAKE] - the installed spoke, seen from an outside project.
#
# Installs the build tree into a fresh temporary prefix, then
#   1. configures, builds and runs tests/consumer with find_package(spoke)
#      (CMAKE_PREFIX_PATH = the prefix), linking spoke::spoke;
#   2. compiles the same consumer.c with `cc $(pkg-config --cflags --libs spoke)`
#      against the prefix's spoke.pc and runs it with LD_LIBRARY_PATH;
#   3. versions: `pkg-config --modversion spoke` is what spoke_version() of the
#      installed library returns, which consumer.c checks against the
#      headers' SPOKE_VERSION_* macros and the CMake package's version;
#   4. man pages: `man -M <prefix>/share/man spoke_start_at` (and a page
#      reached through a .so link) shows the page.
# Exits non-zero on any failure. Run by ctest as install.consumer.
set -eu

build_dir=${1:?usage: run.sh BUILD_DIR [CC] [CMAKE]}
cc=${2:-cc}
cmake=${3:-cmake}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spoke-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

die() {
	echo "run.sh: $*" >&2
	exit 1
}

# Show a step's log only when it fails.
step() {
	what=$1
	shift
	if ! "$@" >"$tmp/step.log" 2>&1; then
		cat "$tmp/step.log" >&2
		die "$what failed: $*"
	fi
}

step "install" "$cmake" --install "$build_dir" --prefix "$prefix"

# 1. find_package(spoke)
step "configure (find_package)" "$cmake" -S "$here" -B "$tmp/cmake-build" \
	-DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release
grep -q "^spoke_DIR:PATH=$prefix/" "$tmp/cmake-build/CMakeCache.txt" ||
	die "find_package(spoke) did not pick the package installed under $prefix: $(grep '^spoke_DIR' "$tmp/cmake-build/CMakeCache.txt")"
step "build (find_package)" "$cmake" --build "$tmp/cmake-build"
"$tmp/cmake-build/spoke_consumer" || die "the find_package consumer failed"
cmake_version=$("$tmp/cmake-build/spoke_consumer" --version) ||
	die "the find_package consumer's version check failed"

# 2. pkg-config spoke
pc=$(find "$prefix" -name spoke.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || die "no pkgconfig/spoke.pc installed under $prefix"
pcdir=$(dirname "$pc")
pc_query() {
	PKG_CONFIG_PATH=$pcdir PKG_CONFIG_LIBDIR=$pcdir pkg-config "$@"
}
pc_query --exists spoke || die "pkg-config does not find spoke in $pcdir"
includedir=$(pc_query --variable=includedir spoke)
libdir=$(pc_query --variable=libdir spoke)
case $includedir/ in
"$prefix"/*) ;;
*) die "spoke.pc installed under $prefix says includedir=$includedir: the .pc file does not follow the install prefix (cmake --install --prefix)" ;;
esac
case $libdir/ in
"$prefix"/*) ;;
*) die "spoke.pc installed under $prefix says libdir=$libdir: the .pc file does not follow the install prefix" ;;
esac
[ -f "$includedir/spoke/engine.h" ] || die "spoke.pc's includedir $includedir has no spoke/engine.h"
# shellcheck disable=SC2046 # the flags are meant to split
step "compile (pkg-config)" "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer-pc" \
	"$here/consumer.c" $(pc_query --cflags --libs spoke)
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/consumer-pc" ||
	die "the pkg-config consumer failed"

# 3. versions
modversion=$(pc_query --modversion spoke)
lib_version=$(LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/consumer-pc" --version) ||
	die "the pkg-config consumer's version check failed"
[ "$modversion" = "$lib_version" ] ||
	die "pkg-config --modversion spoke says $modversion, spoke_version() says $lib_version"
[ "$modversion" = "$cmake_version" ] ||
	die "pkg-config --modversion spoke says $modversion, the find_package consumer's spoke_version() $cmake_version"

# 4. man pages
mandir=$prefix/share/man
for page in spoke spoke_start_at spoke_destroy_release; do
	[ -f "$mandir/man3/$page.3" ] || die "no man3/$page.3 installed under $mandir"
	if command -v man >/dev/null 2>&1; then
		MANPATH='' MANWIDTH=80 man -M "$mandir" 3 "$page" 2>"$tmp/man.err" | grep -q "$page" ||
			die "man -M $mandir 3 $page shows no page for $page: $(cat "$tmp/man.err")"
	fi
done
echo "run.sh: find_package(spoke) and pkg-config spoke both work from $prefix; version $modversion everywhere; man pages installed"
