#!/usr/bin/env bash
# Unpack the Linux source tree (Debian's linux-source-6.1 package, ~140 MB
# download, ~1.4 GB unpacked, ~80,000 files) into bench/out/corpus/, where
# bench/build.sh picks it up as an extra corpus.
# Usage: bench/prepare-corpus.sh   (root: apt-get install)
set -eu
. "$(dirname "$0")/lib.sh"

PKG=linux-source-6.1
DEST=$OUT/corpus
if compgen -G "$DEST/linux-source-*/Makefile" > /dev/null; then
	echo "already unpacked: $(ls -d "$DEST"/linux-source-*/)"
	exit 0
fi
first_tarball() {
	for t in /usr/src/linux-source-*.tar.xz; do
		[ -f "$t" ] && { echo "$t"; return 0; }
	done
	return 0	# none yet: the caller installs the package
}
TARBALL=$(first_tarball)
if [ -z "$TARBALL" ]; then
	[ "$(id -u)" = 0 ] || { echo "$0: needs root to install $PKG" >&2; exit 1; }
	apt-get install -y --no-install-recommends "$PKG"
	TARBALL=$(first_tarball)
fi
mkdir -p "$DEST"
echo "unpacking $TARBALL into $DEST"
tar -C "$DEST" -xJf "$TARBALL"
ls -d "$DEST"/linux-source-*/
