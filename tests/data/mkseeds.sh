#!/bin/sh
# Seed corpus for fuzz/fuzz-image.c: small EROFS images (< 32 KiB each) made
# by mkfs.erofs, covering the uncompressed features, plus hand-corrupted
# variants. Writes into fuzz/corpus/image/ (or the directory in $1).
# Needs root (device nodes, trusted.* xattrs) and mkfs.erofs; set
# KILN_TEST_BLKSZ to a built tests/unit/test-reader-blksz for crafted seeds.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../fuzz/corpus/image}
mkfs=${MKFS_EROFS:-mkfs.erofs}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

uuid=6b696c6e-0000-4000-8000-000000000001
stamp=202601010000

build() {	# build <name> <tree dir> [mkfs options...]
	name=$1
	tree=$2
	shift 2
	find "$tree" -exec touch -h -t "$stamp" {} +
	"$mkfs" --quiet -T 1767225600 -U "$uuid" "$@" "$out/$name" "$tree" \
		>/dev/null
	size=$(stat -c %s "$out/$name")
	if [ "$size" -ge 32768 ]; then
		echo "mkseeds: $name is $size bytes (limit 32 KiB)" >&2
		exit 1
	fi
}

# basic: every file type, inline tails, hardlink, symlinks, xattrs
t=$work/basic
mkdir -p "$t/dir/sub"
printf 'hello\n' >"$t/hello"
head -c 5000 /dev/zero | tr '\0' 'a' >"$t/tail5000"
ln "$t/hello" "$t/dir/hardlink"
ln -s hello "$t/link"
ln -s /dir/sub "$t/abslink"
ln -s ../hello "$t/dir/sub/up"
mknod "$t/chr" c 1 3
mknod "$t/blk" b 8 1
mkfifo "$t/fifo"
setfattr -n user.color -v blue "$t/hello"
setfattr -n trusted.overlay.opaque -v y "$t/dir"
setfattr -n security.capability -v 0sAQAAAgAgAAAAAAAAAAAAAAAAAAA= "$t/tail5000"
build basic.img "$t"

# flat: a block-aligned FLAT_PLAIN file and a multi-block file
t=$work/flat
mkdir -p "$t"
head -c 4096 /dev/zero | tr '\0' 'b' >"$t/block"
seq 1 2500 >"$t/numbers"
build flat.img "$t"

# shared xattrs (used by more than -x 1 inodes) and a long value
t=$work/xattr
mkdir -p "$t"
for i in 1 2 3 4; do
	printf '%s' "$i" >"$t/f$i"
	setfattr -n user.common -v "same value" "$t/f$i"
	setfattr -n user.own$i -v "v$i" "$t/f$i"
done
setfattr -n user.long -v "$(head -c 1500 /dev/zero | tr '\0' 'x')" "$t/f1"
build xattr.img "$t" -x 1

# a directory spanning several blocks, names sorting before "."
t=$work/many
mkdir -p "$t/d"
for i in $(seq 1 120); do
	: >"$t/d/entry-with-a-longish-name-$i"
done
: >"$t/d/!first"
: >"$t/d/ space"
: >"$t/d/-dash"
build many.img "$t"

# chunk-based files, 4-byte and 8-byte chunk entries
t=$work/chunk
mkdir -p "$t"
seq 1 3000 >"$t/data"
printf 'x' >"$t/one"
build chunk.img "$t" --chunksize=4096

# metadata-compressed (metabox) images: inodes, inline tails, directories
# and compressed-file indexes inside the metabox inode's data. Needs
# mkfs.erofs 1.9 or newer (-m); older ones leave these seeds as they are.
if "$mkfs" --help 2>&1 | grep -q -- '^ *-m#'; then
	build metabox.img "$work/basic" -zlz4hc -m4096 -Eztailpacking
	build metabox-plain.img "$work/flat" -m4096
	build metabox-zstd-dirs.img "$work/many" -zzstd -m4096 --zD=1 \
		-Efragments,48bit
	build metabox-chunk.img "$work/chunk" --chunksize=4096 -m4096
else
	echo "mkseeds: $mkfs lacks -m (metabox), metabox seeds not refreshed" >&2
fi

# extra devices: chunks on a blob the seed lacks (reads say "needs
# device"), and a tar index with its tar appended (the flattened form)
build blobdev.img "$work/chunk" --blobdev="$work/blob" --chunksize=4096
if "$mkfs" --help 2>&1 | grep -q -- '--tar='; then
	tar --format=ustar --owner=0 --group=0 --mtime=@1767225600 \
		-cf "$work/layer.tar" -C "$work/flat" .
	"$mkfs" --quiet -T 1767225600 -U "$uuid" --tar=i "$work/index.img" \
		"$work/layer.tar" >/dev/null
	cat "$work/index.img" "$work/layer.tar" >"$out/tarindex-flat.img"
fi

# crafted 512 and 1024-byte block images (mkfs.erofs 1.5 writes only 4096):
# the ones tests/unit/test-reader-blksz builds, if that binary is at hand
blksz_test=${KILN_TEST_BLKSZ:-$here/../../build/tests/unit/test-reader-blksz}
if [ -x "$blksz_test" ]; then
	KILN_CRAFT_DUMP=$work "$blksz_test" >/dev/null
	cp "$work/craft-512.img" "$work/craft-1024.img" "$out/"
else
	echo "mkseeds: $blksz_test missing, crafted seeds not refreshed" >&2
fi

# hand-corrupted variants of basic.img (checksum flag cleared so the
# damage reaches past the superblock check)
patch() {	# patch <from> <to> <python statements on bytearray d>
	"$py" - "$out/$1" "$out/$2" "$3" <<'EOF'
import sys
src, dst, code = sys.argv[1], sys.argv[2], sys.argv[3]
d = bytearray(open(src, 'rb').read())
d[1032] &= 0xFE
exec(code)
open(dst, 'wb').write(d)
EOF
}
root_off='(1024 + 128)'
patch basic.img bad-root-nameoff.img "d[$root_off + 64 + 8] ^= 0x40"
patch basic.img bad-root-size.img "d[$root_off + 8] = 0xFF; d[$root_off + 9] = 0xFF"
patch basic.img bad-root-format.img "d[$root_off] = 0x0E"
patch basic.img bad-xattr-count.img "d[$root_off + 2] = 0xFF; d[$root_off + 3] = 0x7F"
patch basic.img bad-meta-blkaddr.img "d[1024 + 0x28] = 0x10"
patch basic.img bad-extslots.img "d[1024 + 0x0D] = 60"
patch basic.img truncated.img "del d[3000:]"
if [ -f "$out/metabox.img" ]; then
	# metabox nid with bit 63 (a self-loop); metabox inode made a directory
	patch metabox.img bad-metabox-loop.img "d[1024 + 0x87] |= 0x80"
	patch metabox.img bad-metabox-mode.img "import struct
nid, = struct.unpack_from('<Q', d, 1024 + 0x80)
blk, = struct.unpack_from('<I', d, 1024 + 0x28)
struct.pack_into('<H', d, blk * 4096 + nid * 32 + 4, 0o40755)
"
fi
patch chunk.img bad-chunk-format.img "import struct
for off in range(1152, 4096 - 4, 32):
    fmt, = struct.unpack_from('<H', d, off)
    if (fmt >> 1) & 7 == 4:
        struct.pack_into('<I', d, off + 16, 0x1F)
"
ls -l "$out"
