#!/bin/sh
# Build erofs-utils (mkfs.erofs, fsck.erofs, dump.erofs, erofsfuse) from
# Debian's unstable source package into a cache directory outside the tree,
# for the compatibility tests and the benchmarks. The system's apt sources
# are left alone: a private apt configuration with its own lists and cache
# fetches the source package only.
#
# Usage: scripts/erofs-utils.sh [CACHE_DIR]     (default ~/.cache/kiln-peers)
# Prints the directory to put first on PATH (CACHE_DIR/erofs-utils-VER/bin).
set -eu

CACHE=${1:-${KILN_PEERS_CACHE:-$HOME/.cache/kiln-peers}}
SUITE=${EROFS_UTILS_SUITE:-unstable}
MIRROR=${EROFS_UTILS_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

. "$(dirname "$0")/lib-apt.sh"

# A finished build is reused as it is (cached between runs): the newest
# version's bin (the glob sorts).
done_bin=$(apt_last_of "$CACHE"/erofs-utils-*/bin)
if [ -n "$done_bin" ] && [ -x "$done_bin/mkfs.erofs" ] &&
   [ -x "$done_bin/fsck.erofs" ] && [ -x "$done_bin/dump.erofs" ]; then
	echo "$done_bin"
	exit 0
fi

apt_private "$CACHE/apt" "$MIRROR" "$SUITE"
dsc=$(apt_source erofs-utils)
ver=$(basename "$dsc" .dsc | sed 's/^erofs-utils_//; s/-[^-]*$//')
src=$APT_DIR/src/erofs-utils-$ver
dpkg-source -x --no-check "$dsc" "$src" >&2

# Build needs: autotools and the codec headers kiln's own deps already bring.
need="autoconf automake libtool pkg-config uuid-dev libselinux1-dev"
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	# a list of package names: split on purpose
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends $missing >&2
fi

cd "$src"
prefix=$CACHE/erofs-utils-$ver
{
	./autogen.sh
	./configure --prefix="$prefix" --enable-lz4 --enable-lzma \
		--with-libzstd --with-libdeflate --enable-fuse \
		--disable-werror
	make -j"$(nproc)"
	make install
} >&2
"$prefix/bin/mkfs.erofs" --version >&2 || true
echo "$prefix/bin"
