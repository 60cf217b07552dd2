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

APT=$CACHE/apt
mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$APT/src" \
	"$APT/empty-parts" "$APT/cache"
echo "deb-src $MIRROR $SUITE main" > "$APT/sources.list"
cat > "$APT/apt.conf" <<CONF
Dir::Etc::SourceList "$APT/sources.list";
Dir::Etc::SourceParts "$APT/empty-parts";
Dir::State::Lists "$APT/lists";
Dir::Cache "$APT/cache";
Dir::Cache::archives "$APT/archives";
APT::Sandbox::User "root";
CONF

updated=false
# Unpack source package $1 under $APT/src; prints the source directory.
unpack() {
	if ! $updated; then
		APT_CONFIG=$APT/apt.conf apt-get update -qq \
			-o Debug::NoLocking=1 >&2
		updated=true
	fi
	cd "$APT/src"
	rm -rf "$1"-*/ "$1"_*
	APT_CONFIG=$APT/apt.conf apt-get source -qq --download-only \
		-o Debug::NoLocking=1 "$1" >&2
	dsc=
	for f in "$1"_*.dsc; do
		dsc=$f
	done
	[ -f "$dsc" ] || { echo "$0: no source package for $1" >&2; exit 1; }
	dpkg-source -x --no-check "$dsc" "$1-src" >&2
	echo "$APT/src/$1-src"
}

build_lz4() {
	src=$(unpack lz4)
	make -C "$src/lib" -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS" liblz4.a >&2
	cp "$src/lib/liblz4.a" "$CACHE/lib/"
	cp "$src/lib/lz4.h" "$src/lib/lz4hc.h" "$src/lib/lz4frame.h" \
		"$CACHE/include/"
}

build_zstd() {
	src=$(unpack libzstd)
	make -C "$src/lib" -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS" libzstd.a >&2
	cp "$src/lib/libzstd.a" "$CACHE/lib/"
	cp "$src/lib/zstd.h" "$src/lib/zstd_errors.h" "$src/lib/zdict.h" \
		"$CACHE/include/"
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
	else
		# 1.14 (Debian 12) still builds with its own Makefile
		make -C "$src" -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS" \
			libdeflate.a >&2
		cp "$src/libdeflate.a" "$CACHE/lib/"
	fi
	cp "$src/libdeflate.h" "$CACHE/include/"
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
