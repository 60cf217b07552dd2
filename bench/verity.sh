#!/usr/bin/env bash
# dm-verity benchmark, side by side in one run (median of N runs each):
#   build: kiln build -z zstd:3 -j2 with and without --verity, and
#          mkfs.erofs -zzstd,level=3 then veritysetup format, run one after
#          the other (the tools' usual pairing);
#   read:  tar of a whole kiln mount to a pipe after drop_caches, with and
#          without --verity (the same image, the tree after it ignored).
# Corpus: /usr/share/doc; with --linux also bench/out/corpus/linux-source-*
# when bench/prepare-corpus.sh unpacked it (slow).
# Usage: bench/verity.sh [--runs N] [--quick] [--linux] [--corpus DIR]...
# Each row: median wall seconds and CPU seconds (user + system: of the
# build, or of the kiln mount serving the tar). Results:
# bench/out/verity-<time>.txt.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=3
CORPORA=()
LINUX=0
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--linux) LINUX=1 ;;
	--quick) RUNS=1 ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--runs N] [--quick] [--linux] [--corpus DIR]..." >&2; exit 2 ;;
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

# "WALL CPU" lines in, "WALL CPU" medians out (each column on its own).
median2() {
	local f=$WORK/samples w c
	cat > "$f"
	w=$(cut -d' ' -f1 "$f" | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }')
	c=$(cut -d' ' -f2 "$f" | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }')
	echo "$w $c"
}

# median_of CMD...: median wall and CPU (user + system) seconds of $RUNS
# runs (outputs removed first). On a shared machine CPU time is the one
# to trust.
median_of() {
	local TIMEFORMAT="%R %U %S"
	for _ in $(seq "$RUNS"); do
		rm -f "$WORK/img"
		# bash's time: wall, user and system of the command and its children
		if ! { time "$@" >/dev/null 2>&1; } 2> "$WORK/time"; then
			echo "FAILED: $*" >&2
			echo "nan nan"
			continue
		fi
		awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$WORK/time"
	done | median2
}

kiln_build() { "$KILN" build -q -z zstd:3 -j2 "$@"; }

mkfs_then_format() {
	mkfs.erofs --quiet -zzstd,level=3 "$WORK/img" "$1" &&
		veritysetup format "$WORK/img" "$WORK/img" \
			--hash-offset="$(stat -c %s "$WORK/img")" >/dev/null
}

# tar of the whole mount of $WORK/v.img, cold: median wall seconds of
# the tar, and CPU seconds of the kiln mount serving it.
read_mount() {
	local pid wall t tck
	tck=$(getconf CLK_TCK)
	for _ in $(seq "$RUNS"); do
		"$KILN" mount -f "$@" "$WORK/v.img" "$MNT" 2>>"$WORK/mount.err" &
		pid=$!
		for t in $(seq 100); do
			mountpoint -q "$MNT" && break
			sleep 0.05
		done
		mountpoint -q "$MNT" || { echo "nan nan"; kill "$pid"; wait "$pid"; continue; }
		drop_caches
		wall=$(time_cmd sh -c "tar -cf - -C '$MNT' . | cat >/dev/null")
		awk -v w="$wall" -v tck="$tck" '{ printf "%s %.2f\n", w, ($14 + $15) / tck }' "/proc/$pid/stat"
		fusermount3 -u "$MNT"
		wait "$pid"
	done | median2
}

# "WALL CPU" "WALL CPU" -> "ratio-wall ratio-cpu"
ratios() { echo "$(ratio "${1% *}" "${2% *}") $(ratio "${1#* }" "${2#* }")"; }

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
	echo "                                       wall s   cpu s    ratio wall cpu"
	printf "build  kiln -z zstd:3 -j2            %15s\n" "$plain"
	printf "build  kiln -z zstd:3 -j2 --verity   %15s   %s\n" "$ver" "$(ratios "$ver" "$plain")"
	stage=$(for _ in $(seq "$RUNS"); do
		"$KILN" build -v -z zstd:3 -j2 --verity "$src" "$WORK/img" 2>&1 >/dev/null |
			awk '/dm-verity: .* blocks hashed/ { print $(NF - 1) }'
	done | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }')
	printf "build  kiln's verity stage alone     %8s s wall (kiln build -v), %s of the build\n" \
		"$stage" "$(ratio "$stage" "${plain% *}")"
	if have mkfs.erofs && have veritysetup; then
		peer=$(median_of mkfs_then_format "$src")
		printf "build  mkfs.erofs + veritysetup      %15s   kiln --verity / this: %s\n" \
			"$peer" "$(ratios "$ver" "$peer")"
	else
		echo "build  mkfs.erofs + veritysetup: not on PATH, skipped"
	fi
	echo "image with tree: $size bytes"
	if [ -e /dev/fuse ] && have fusermount3; then
		r0=$(read_mount)
		r1=$(read_mount --verity "$(cat "$WORK/root")")
		printf "read   tar of kiln mount             %15s   (cpu: the mount's)\n" "$r0"
		printf "read   tar of kiln mount --verity    %15s   %s\n" "$r1" "$(ratios "$r1" "$r0")"
	else
		echo "read: no /dev/fuse or fusermount3, skipped"
	fi
done
} | tee "$TXT"
echo "results: $TXT"
