#!/bin/sh
# Install the Debian packages kiln needs to build, test and benchmark
# (man-db, groff-base and zsh: the tests of the generated man pages and
# completions; shellcheck: CI's script check; gnuplot-nox: bench/report.sh;
# squashfs-tools-ng: tar2sqfs, a peer of bench/oci.sh;
# umoci and skopeo: the OCI image tests' layouts and reference unpacking;
# nodejs and npm: scripts/s3rver.sh, the S3 server of the s3:// tests, and
# curl, which uploads their objects).
# Only what is missing is installed; nothing is downloaded otherwise.
set -eu

PKGS="build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
libzstd-dev liblz4-dev libdeflate-dev liblzma-dev libfuse3-dev fuse3
libarchive-dev libjansson-dev libxxhash-dev libisal-dev libselinux1-dev libssl-dev python3
python3-pytest attr acl selinux-utils libarchive-tools cpio cryptsetup-bin
erofs-utils squashfs-tools squashfs-tools-ng squashfuse fio zstd xz-utils bzip2 gzip
util-linux kmod time bc umoci skopeo libcurl4-openssl-dev nginx-light openssl
man-db groff-base zsh shellcheck gnuplot-nox nodejs curl"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# npm: Debian's package, unless the nodejs installed already brings it
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing"
$SUDO apt-get update -qq
# $missing is a list of names, $SUDO empty or one word: split on purpose
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
