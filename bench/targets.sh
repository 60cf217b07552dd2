#!/usr/bin/env bash
# Default images against their peers, per kernel target, side by side in one
# run (issue: default images that mount on the kernels users run). For each
# corpus and setting (zstd:3, zstd:15, lz4hc:9) it builds, at 2 threads for
# every tool:
#   kiln              kiln's defaults (default target: Linux 6.1, raised to
#                     the codec's first kernel: 6.10 for zstd)
#   kiln-5.15         --kernel 5.15 (lz4hc only: zstd needs 6.10)
#   kiln-extents      --layout extents (48-bit, Linux 6.15+, zstd only): the
#                     layout the classic build time is compared with
#   mkfs.erofs        its defaults (-z only)
#   mkfs.erofs-best   -C131072 -Eztailpacking,fragments,dedupe (its smallest
#                     classic image: the same kernels as kiln's default)
#   mkfs.erofs-5.15   -C131072 (lz4hc: big pclusters, 5.13; ztailpacking
#                     needs 5.17 and fragments 6.1)
#   mksquashfs        -processors 2, its defaults otherwise (128 KiB blocks)
#   tar|zstd          tar -cf - . | zstd -LEVEL -T2 (solid, not mountable;
#                     zstd settings only)
# and reports the median wall time of N runs (with min and max), the image
# size and the peak RSS (the largest of the runs, /usr/bin/time %M).
#
# Usage: bench/targets.sh [--runs N] [--corpus DIR]...
#   SETTINGS="zstd3 lz4hc" picks settings; TOOLS="kiln mksquashfs" tools.
# Peers come from PATH: put erofs-utils 1.9 first (scripts/erofs-utils.sh
# prints its bin directory). Results: bench/out/targets-<time>.txt, .csv and .tsv.
set -eu
. "$(dirname "$0")/lib.sh"

CORPORA=()
RUNS=3
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--runs N] [--corpus DIR]..." >&2; exit 2 ;;
	esac
	shift
done
default_corpora 0
SETTINGS=${SETTINGS:-zstd3 zstd15 lz4hc}
ALL_TOOLS="kiln kiln-5.15 kiln-extents mkfs.erofs mkfs.erofs-best mkfs.erofs-5.15 mksquashfs tar|zstd"
TOOLS=${TOOLS:-$ALL_TOOLS}
[ -x "$KILN" ] || { echo "no kiln at $KILN (build first or set KILN)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian: time)" >&2; exit 1; }

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/targets-$STAMP.txt
CSV=$OUT/targets-$STAMP.csv
IMG=$OUT/targets-work.img
echo "corpus,setting,tool,run,seconds,image_bytes,peak_rss_kib" > "$CSV"

kiln_z() { case $1 in zstd3) echo zstd:3 ;; zstd15) echo zstd:15 ;; lz4hc) echo lz4hc:9 ;; esac; }
mkfs_z() { case $1 in zstd3) echo zstd,level=3 ;; zstd15) echo zstd,level=15 ;; lz4hc) echo lz4hc,9 ;; esac; }
squash_comp() {
	case $1 in
	zstd3) echo "-comp zstd -Xcompression-level 3" ;;
	zstd15) echo "-comp zstd -Xcompression-level 15" ;;
	lz4hc) echo "-comp lz4 -Xhc" ;;
	esac
}

# The command line of TOOL for SETTING on SRC, or nothing where it does not
# apply; "tar|zstd" is run through sh -c.
cmd_of() {
	local tool=$1 set=$2 src=$3 kz mz
	kz=$(kiln_z "$set"); mz=$(mkfs_z "$set")
	case $tool in
	kiln) echo "$KILN build -q -j2 -z $kz $src $IMG" ;;
	kiln-5.15) [ "$set" = lz4hc ] && echo "$KILN build -q -j2 -z $kz --kernel 5.15 $src $IMG" ;;
	kiln-extents) [ "$set" = zstd3 ] && echo "$KILN build -q -j2 -z $kz --layout extents $src $IMG" ;;
	mkfs.erofs) echo "mkfs.erofs --quiet -z$mz --workers=2 $IMG $src" ;;
	mkfs.erofs-best) echo "mkfs.erofs --quiet -z$mz -C131072 -Eztailpacking,fragments,dedupe --workers=2 $IMG $src" ;;
	mkfs.erofs-5.15) [ "$set" = lz4hc ] && echo "mkfs.erofs --quiet -z$mz -C131072 --workers=2 $IMG $src" ;;
	mksquashfs) echo "mksquashfs $src $IMG $(squash_comp "$set") -processors 2 -noappend -quiet" ;;
	"tar|zstd") case $set in zstd*) echo "tar -C $src -cf - . | zstd -q -${set#zstd} -T2 -o $IMG -f" ;; esac ;;
	esac
	return 0
}

# run_once CMD: "seconds peak_rss_kib" of one run (shell pipelines allowed).
run_once() {
	local tf=$OUT/targets-time.txt
	rm -f "$IMG"
	/usr/bin/time -f '%e %M' -o "$tf" sh -c "$1" >/dev/null 2>&1 ||
		{ echo "FAILED: $1" >&2; echo "nan nan"; return 0; }
	cat "$tf"
}

med() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mb() { awk -v b="$1" 'BEGIN { if (b == "nan") print "nan"; else printf "%.1f", b / 1e6 }'; }

{
	echo "# bench/targets.sh $STAMP on $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RUNS runs each"
	echo "# kiln: $KILN ($($KILN --version 2>/dev/null | head -n1))"
	echo "# mkfs.erofs: $(mkfs.erofs -V 2>/dev/null | head -n1); $(mksquashfs -version 2>/dev/null | head -n1); every tool at 2 threads"
	echo "# seconds: median (min-max) of the runs; MB = 10^6 bytes; RSS: largest peak of the runs"
} | tee "$TXT"
tsv_open "$OUT/targets-$STAMP.tsv"
tsv_row "# title: default images per kernel target: size, build time, peak memory"
tsv_row "# threads: every tool at 2 threads; seconds: median (min-max) of $RUNS runs; RSS: the largest peak"
tsv_row "# x: setting"
tsv_row "# series: tool"
tsv_row "# plot: image_bytes MB 1000000 image size"
tsv_row "# plot: seconds s 1 build time"
tsv_row "# plot: peak_rss_kib MiB 1024 peak memory"
tsv_row table setting tool seconds seconds_min seconds_max image_bytes peak_rss_kib min_kernel

for src in "${CORPORA[@]}"; do
	[ -d "$src" ] || continue
	tar -C "$src" -cf - . > /dev/null	# warm the page cache for everyone
	{
		echo
		echo "## $src: $(find "$src" | wc -l) entries, $(du -sm --apparent-size "$src" | cut -f1) MiB"
		printf '%-7s %-16s %22s %9s %9s %8s\n' setting tool seconds image_MB rss_MiB kernel
	} | tee -a "$TXT"
	for set in $SETTINGS; do
		for tool in $TOOLS; do
			cmd=$(cmd_of "$tool" "$set" "$src")
			[ -n "$cmd" ] || continue
			case $tool in
			mkfs.erofs*) have mkfs.erofs || continue ;;
			mksquashfs) have mksquashfs || continue ;;
			esac
			times=() rss=0 sz=nan
			for r in $(seq "$RUNS"); do
				read -r t m < <(run_once "$cmd")
				times+=("$t")
				[ "$m" != nan ] && [ "$m" -gt "$rss" ] && rss=$m
				sz=$(stat -c %s "$IMG" 2>/dev/null || echo nan)
				echo "$src,$set,$tool,$r,$t,$sz,$m" >> "$CSV"
			done
			kern=-
			if [ "$sz" != nan ] && [ "$tool" != "tar|zstd" ] && [ "$tool" != mksquashfs ]; then
				kern=$("$KILN" info --json "$IMG" 2>/dev/null | /usr/bin/python3 -c \
					'import json,sys; j=json.load(sys.stdin); print(j.get("min_kernel") or "-")' 2>/dev/null || echo -)
			fi
			[ "$tool" = mksquashfs ] && kern=any
			tm=$(printf '%s\n' "${times[@]}" | med)
			lo=$(printf '%s\n' "${times[@]}" | sort -g | head -n1)
			hi=$(printf '%s\n' "${times[@]}" | sort -g | tail -n1)
			tsv_row "$src" "$set" "$tool" "$tm" "$lo" "$hi" "$sz" "$rss" "$kern"
			printf '%-7s %-16s %22s %9s %9s %8s\n' "$set" "$tool" \
				"$tm ($lo-$hi)" "$(mb "$sz")" \
				"$(awk -v k="$rss" 'BEGIN { printf "%.0f", k / 1024 }')" "$kern" | tee -a "$TXT"
		done
	done
done
rm -f "$IMG" "$OUT/targets-time.txt"
echo "results: $TXT, $CSV, $TSV" >&2
