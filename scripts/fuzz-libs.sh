#!/bin/sh
# Build instrumented static copies of the codec libraries kiln links (lz4,
# zstd, libdeflate, liblzma) from Debian 12's source packages, into a cache
# directory outside the tree, for the libFuzzer targets: with them the
# fuzzers see the edges inside the decoders, not only kiln's wrappers.
# The system's apt sources are left alone: a private apt configuration
# with its own lists and cache fetches the source packages only.
#
# Usage: scripts/fuzz-libs.sh [LIB...]      (default: lz4 zstd deflate lzma)
# Environment: KILN_FUZZ_LIBS (default ~/.cache/kiln-fuzz-libs), CC (clang),
# FUZZ_LIBS_SUITE (bookworm), FUZZ_LIBS_MIRROR.
# Prints the directory to give meson: -Dfuzz_libs=DIR (DIR/include, DIR/lib).
set -eu

CACHE=${KILN_FUZZ_LIBS:-$HOME/.cache/kiln-fuzz-libs}
SUITE=${FUZZ_LIBS_SUITE:-bookworm}
MIRROR=${FUZZ_LIBS_MIRROR:-http://deb.debian.org/debian}
CC=${CC:-clang}
CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined"
JOBS=${JOBS:-2}
LIBS=${*:-lz4 zstd deflate lzma}
mkdir -p "$CACHE/include" "$CACHE/lib"
CACHE=$(cd "$CACHE" && pwd)

. "$(dirname "$0")/lib-apt.sh"
apt_private "$CACHE/apt" "$MIRROR" "$SUITE"

# Unpack source package $1 under $APT_DIR/src; prints the source directory.
unpack() {
	dsc=$(apt_source "$1")
	dpkg-source -x --no-check "$dsc" "$APT_DIR/src/$1-src" >&2
	echo "$APT_DIR/src/$1-src"
}

# make_lib DIR LIB HEADER...: build static library LIB with DIR's
# Makefile, then copy it and the headers (relative to DIR) into the cache.
make_lib() {
	dir=$1 lib=$2
	shift 2
	make -C "$dir" -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS" "$lib" >&2
	cp "$dir/$lib" "$CACHE/lib/"
	for h in "$@"; do
		cp "$dir/$h" "$CACHE/include/"
	done
}

build_lz4() {
	src=$(unpack lz4)
	make_lib "$src/lib" liblz4.a lz4.h lz4hc.h lz4frame.h
}

build_zstd() {
	src=$(unpack libzstd)
	make_lib "$src/lib" libzstd.a zstd.h zstd_errors.h zdict.h
}

build_deflate() {
	src=$(unpack libdeflate)
	if [ -f "$src/CMakeLists.txt" ]; then
		cmake -S "$src" -B "$src/build" -DCMAKE_C_COMPILER="$CC" \
			-DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=None \
			-DLIBDEFLATE_BUILD_SHARED_LIB=OFF \
			-DLIBDEFLATE_BUILD_GZIP=OFF >&2
		cmake --build "$src/build" -j "$JOBS" >&2
		cp "$src/build/libdeflate.a" "$CACHE/lib/"
		cp "$src/libdeflate.h" "$CACHE/include/"
	else
		# 1.14 (Debian 12) still builds with its own Makefile
		make_lib "$src" libdeflate.a libdeflate.h
	fi
}

build_lzma() {
	src=$(unpack xz-utils)
	(cd "$src" && ./configure CC="$CC" CFLAGS="$CFLAGS" \
		--disable-shared --disable-xz --disable-xzdec \
		--disable-lzmadec --disable-lzmainfo --disable-lzma-links \
		--disable-scripts --disable-doc --disable-nls) >&2
	make -C "$src/src/liblzma" -j"$JOBS" >&2
	cp "$src/src/liblzma/.libs/liblzma.a" "$CACHE/lib/"
	cp -r "$src/src/liblzma/api/lzma.h" "$src/src/liblzma/api/lzma" \
		"$CACHE/include/"
}

for lib in $LIBS; do
	case $lib in
	lz4|zstd|deflate|lzma) ;;
	*) echo "fuzz-libs.sh: unknown library '$lib'" >&2; exit 2 ;;
	esac
	# a finished library is reused as it is (cached between runs)
	[ -f "$CACHE/lib/lib$lib.a" ] && continue
	echo "fuzz-libs.sh: building $lib" >&2
	"build_$lib"
done
echo "$CACHE"
