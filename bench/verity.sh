#!/usr/bin/env bash
# dm-verity benchmark, side by side in one run (median of N runs each):
#   build: kiln build -z zstd:3 -j2 with and without --verity, and
#          mkfs.erofs -zzstd,level=3 then veritysetup format, run one after
#          the other (the tools' usual pairing);
#   read:  tar of a whole kiln mount to a pipe after drop_caches, with and
#          without --verity (the same image, the tree after it ignored).
# Corpus: /usr/share/doc; with --linux also bench/out/corpus/linux-source-*
# when bench/prepare-corpus.sh unpacked it (slow).
# Usage: bench/verity.sh [--runs N] [--linux] [--corpus DIR]...
# Results: bench/out/verity-<time>.txt.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=3
CORPORA=()
LINUX=0
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--linux) LINUX=1 ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--runs N] [--linux] [--corpus DIR]..." >&2; exit 2 ;;
	esac
	shift
done
if [ ${#CORPORA[@]} -eq 0 ]; then
	CORPORA=(/usr/share/doc)
	if [ "$LINUX" = 1 ]; then
		for d in "$OUT"/corpus/linux-source-*/; do
			[ -d "$d" ] && CORPORA+=("${d%/}")
		done
	fi
fi
[ -x "$KILN" ] || { echo "$0: no kiln at $KILN (set KILN=)" >&2; exit 1; }

WORK=$OUT/verity-work
MNT=$WORK/mnt
mkdir -p "$WORK" "$MNT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/verity-$STAMP.txt
trap 'fusermount3 -u "$MNT" 2>/dev/null; rm -rf "$WORK"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }

# median_of CMD...: the median wall time of $RUNS runs (outputs removed first).
median_of() {
	local i
	for i in $(seq "$RUNS"); do
		rm -f "$WORK/img"
		time_cmd "$@"
		echo
	done | median
}

kiln_build() { "$KILN" build -q -z zstd:3 -j2 "$@"; }

mkfs_then_format() {
	mkfs.erofs --quiet -zzstd,level=3 "$WORK/img" "$1" &&
		veritysetup format "$WORK/img" "$WORK/img" \
			--hash-offset="$(stat -c %s "$WORK/img")" >/dev/null
}

# tar of the whole mount of $WORK/v.img, cold: median seconds.
read_mount() {
	local i
	for i in $(seq "$RUNS"); do
		"$KILN" mount "$@" "$WORK/v.img" "$MNT" || { echo nan; continue; }
		drop_caches
		time_cmd sh -c "tar -cf - -C '$MNT' . | cat >/dev/null"
		echo
		fusermount3 -u "$MNT"
	done | median
}

{
echo "dm-verity: $RUNS runs each, medians; kiln $("$KILN" --version 2>/dev/null | head -1)"
echo "machine: $(nproc) cores, $(uname -r)"
for src in "${CORPORA[@]}"; do
	echo
	echo "== $src ($(du -sh "$src" 2>/dev/null | cut -f1))"
	plain=$(median_of kiln_build "$src" "$WORK/img")
	ver=$(median_of kiln_build --verity "$src" "$WORK/img")
	kiln_build --verity --verity-root-hash-file "$WORK/root" "$src" "$WORK/v.img"
	size=$(stat -c %s "$WORK/v.img")
	printf "build  kiln -z zstd:3 -j2            %8s s\n" "$plain"
	printf "build  kiln -z zstd:3 -j2 --verity   %8s s   ratio %s\n" "$ver" "$(ratio "$ver" "$plain")"
	if have mkfs.erofs && have veritysetup; then
		peer=$(median_of mkfs_then_format "$src")
		printf "build  mkfs.erofs -zzstd,level=3 + veritysetup format %8s s   kiln --verity / this %s\n" \
			"$peer" "$(ratio "$ver" "$peer")"
	else
		echo "build  mkfs.erofs + veritysetup: not on PATH, skipped"
	fi
	echo "image with tree: $size bytes"
	if [ -e /dev/fuse ] && have fusermount3; then
		r0=$(read_mount)
		r1=$(read_mount --verity "$(cat "$WORK/root")")
		printf "read   tar of kiln mount              %8s s\n" "$r0"
		printf "read   tar of kiln mount --verity     %8s s   ratio %s\n" "$r1" "$(ratio "$r1" "$r0")"
	else
		echo "read: no /dev/fuse or fusermount3, skipped"
	fi
done
} | tee "$TXT"
echo "results: $TXT"
