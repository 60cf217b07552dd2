#!/usr/bin/env bash
# What a compressed file's pcluster size costs random readers, side by side
# in one run: a file of C source (the Linux tree's .c files, concatenated
# up to --mib MiB) is built into zstd images by kiln at each -C given, by
# mkfs.erofs (-C131072, when it has zstd) and mksquashfs (128 KiB blocks),
# and read through kernel mounts by fio: 4 KiB random reads, one job, a
# quarter of the file, fixed seed, cold cache. Medians (min-max) of --runs.
#
# Usage: bench/pcluster-read.sh [--runs N] [--mib N] [--level N] [-C BYTES]...
#   (root; the Linux tree from bench/prepare-corpus.sh, or --src FILE)
# Results: bench/out/pcluster-read-<time>.txt and .tsv.
set -eu
. "$(dirname "$0")/lib.sh"

RUNS=3
MIB=256
LEVEL=3
SIZES=()
SRCFILE=""
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--mib) MIB=$2; shift ;;
	--level) LEVEL=$2; shift ;;
	-C) SIZES+=("$2"); shift ;;
	--src) SRCFILE=$2; shift ;;
	*) echo "usage: $0 [--runs N] [--mib N] [--level N] [-C BYTES]... [--src FILE]" >&2; exit 2 ;;
	esac
	shift
done
[ ${#SIZES[@]} -gt 0 ] || SIZES=(65536 131072)

W=$OUT/pcluster-read
MNT=$W/mnt
mkdir -p "$W/tree" "$MNT"
if [ -z "$SRCFILE" ]; then
	SRCFILE=$W/tree/source.c
	if [ ! -f "$SRCFILE" ] || [ "$(stat -c %s "$SRCFILE")" -ne $((MIB << 20)) ]; then
		linux=""
		for d in "$OUT"/corpus/linux-source-*/; do
			[ -d "$d" ] && { linux=$d; break; }
		done
		[ -n "$linux" ] || { echo "$0: no Linux tree: run bench/prepare-corpus.sh or give --src" >&2; exit 2; }
		find "$linux" -name '*.c' -type f | sort | xargs cat 2>/dev/null | head -c $((MIB << 20)) > "$SRCFILE"
	fi
else
	rm -f "$W/tree/source.c"
	ln "$SRCFILE" "$W/tree/source.c" 2>/dev/null || cp "$SRCFILE" "$W/tree/source.c"
	SRCFILE=$W/tree/source.c
fi
size=$(stat -c %s "$SRCFILE")

declare -a LABELS=() IMAGES=() TYPES=()
add() { LABELS+=("$1"); IMAGES+=("$2"); TYPES+=("$3"); }
for c in "${SIZES[@]}"; do
	img=$W/kiln-$c.erofs
	"$KILN" build -q -z "zstd:$LEVEL" -C "$c" "$W/tree" "$img"
	add "kiln -C $c" "$img" erofs
done
if mkfs.erofs -zzstd,level="$LEVEL" -C131072 "$W/mkfs.erofs" "$W/tree" >/dev/null 2>&1; then
	add "mkfs.erofs -C131072" "$W/mkfs.erofs" erofs
fi
if have mksquashfs; then
	mksquashfs "$W/tree" "$W/squashfs" -comp zstd -Xcompression-level "$LEVEL" \
		-processors 2 -noappend -quiet >/dev/null
	add "mksquashfs" "$W/squashfs" squashfs
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/pcluster-read-$STAMP.txt
tsv_open "$OUT/pcluster-read-$STAMP.tsv"
tsv_row "# title: random 4 KiB reads of a $((size >> 20)) MiB C file, zstd:$LEVEL, kernel mounts, cold cache"
tsv_row "# threads: 1 (fio, one job)"
tsv_row "# x: image"
tsv_row "# series: workload"
tsv_row "# plot: iops IOPS 1 IOPS"
tsv_row table image workload iops iops_min iops_max
{
	echo "# $(basename "$SRCFILE"): $size bytes, zstd:$LEVEL, fio randread 4k, 1 job, $((size >> 22)) MiB of reads, median (min-max) of $RUNS cold runs"
	echo "# $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-22s %12s %24s\n' image bytes IOPS
} | tee "$TXT"
for i in "${!LABELS[@]}"; do
	runs=""
	mount -t "${TYPES[$i]}" -o loop,ro "${IMAGES[$i]}" "$MNT"
	for _ in $(seq "$RUNS"); do
		drop_caches
		fio --name=r --filename="$MNT/source.c" --rw=randread --bs=4k \
			--ioengine=psync --numjobs=1 --size="$size" \
			--io_size=$((size / 4)) --norandommap=1 --randrepeat=1 \
			--output-format=json --output="$W/fio.json" >/dev/null 2>&1 ||
			{ echo "$0: fio failed on ${LABELS[$i]}" >&2; continue; }
		runs+=$(/usr/bin/python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$W/fio.json")$'\n'
	done
	umount "$MNT" 2>/dev/null || { sleep 2; umount "$MNT"; } || umount -l "$MNT"
	read -r m lo hi <<< "$(grep . <<< "$runs" | stats)"
	printf '%-22s %12s %24s\n' "${LABELS[$i]}" "$(stat -c %s "${IMAGES[$i]}")" "$m ($lo-$hi)" | tee -a "$TXT"
	tsv_row row "${LABELS[$i]}" rand4k "$m" "$lo" "$hi"
done
echo "results: $TXT"
