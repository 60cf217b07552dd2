#!/usr/bin/env bash
# Compressed image size and build time, every codec, side by side in one run:
#   kiln (defaults), kiln-best (128 KiB pclusters/extents, fragments, dedupe),
#   kiln-min (the smallest kiln makes: classic fixed-output 128 KiB
#   pclusters, fragments, dedupe of copies at any offset,
#   --dedupe-shifted, and compressed metadata, --metabox),
#   kiln-shift (256 KiB extents, fragments, --dedupe-shifted, --metabox:
#   copies at other offsets shared too; a 256 KiB extent decodes less
#   than a fixed-output 128 KiB pcluster, which holds 350-450 KiB of
#   binaries or sources),
#   mkfs.erofs (-z only), mkfs.erofs-best (-C131072 -Efragments,dedupe:
#   fixed-output pclusters; erofs-utils 1.9+), mkfs.erofs-48bit (the same
#   with -E48bit, not for lz4/lz4hc), mkfs.erofs-mbx (with -m16384,
#   metadata compression, which implies the 48-bit layout),
#   mksquashfs (its defaults: 128 KiB blocks, fragments, duplicate files)
# for lz4, lz4hc, deflate:6 (squashfs: gzip -6), zstd:3, zstd:15 and
# lzma:6 (squashfs: xz), on each corpus.
#
# Every tool runs with $THREADS threads (default 2; mkfs.erofs before 1.8
# with one). Build times: the median of --runs N (default 3), with min
# and max.
#
# Usage: bench/compress.sh [--quick] [--runs N] [--corpus DIR]...
#   --quick   /usr/share/doc only, and only lz4hc, zstd:3 and lzma:6
# SETTINGS="zstd3 lzma6" picks settings. Peers come from PATH (a newer
# mkfs.erofs first on PATH is measured as it is).
# Results: bench/out/compress-<time>.txt (table), .csv and .tsv (for
# bench/report.sh).
set -eu
. "$(dirname "$0")/lib.sh"

CORPORA=()
QUICK=0
RUNS=3
THREADS=${THREADS:-2}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--runs) RUNS=$2; shift ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--quick] [--runs N] [--corpus DIR]..." >&2; exit 2 ;;
	esac
	shift
done
default_corpora $QUICK
if [ $QUICK = 1 ]; then
	SETTINGS=${SETTINGS:-lz4hc zstd3 lzma6}
else
	SETTINGS=${SETTINGS:-lz4 lz4hc deflate6 zstd3 zstd15 lzma6}
fi
[ -x "$KILN" ] || { echo "no kiln at $KILN (build first or set KILN)" >&2; exit 1; }

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/compress-$STAMP.txt
CSV=$OUT/compress-$STAMP.csv
IMG=$OUT/compress-work.img
echo "corpus,setting,tool,seconds,image_bytes" > "$CSV"
TSV=$OUT/compress-$STAMP.tsv

MKFS_VER=$(mkfs.erofs -V 2>/dev/null | head -n1 | sed 's/^mkfs.erofs *//')
MKFS_NEW=0	# zstd, lzma, deflate, -E48bit/fragments/dedupe, --workers
MKFS_MBX=0	# -m: metadata compression (metabox)
MKFS_THREADS=1
MKFS_WORKERS=()
if have mkfs.erofs && mkfs.erofs --help 2>&1 | grep -q -- '--workers'; then
	MKFS_NEW=1
	MKFS_THREADS=$THREADS
	MKFS_WORKERS=("--workers=$THREADS")
	mkfs.erofs --help 2>&1 | grep -q 'metadata compression' && MKFS_MBX=1
fi

# kiln -z, mkfs.erofs -z, mksquashfs -comp args, for each setting
kiln_z() {
	case $1 in
	lz4) echo lz4 ;; lz4hc) echo lz4hc:9 ;; deflate6) echo deflate:6 ;;
	zstd3) echo zstd:3 ;; zstd15) echo zstd:15 ;; lzma6) echo lzma:6 ;;
	esac
}
mkfs_z() {
	case $1 in
	lz4) echo lz4 ;; lz4hc) echo lz4hc,9 ;;
	deflate6) [ $MKFS_NEW = 1 ] && echo deflate,level=6 ;;
	zstd3) [ $MKFS_NEW = 1 ] && echo zstd,level=3 ;;
	zstd15) [ $MKFS_NEW = 1 ] && echo zstd,level=15 ;;
	lzma6) [ $MKFS_NEW = 1 ] && echo lzma,level=6 ;;
	esac
	return 0
}
squash_comp() {
	case $1 in
	lz4) echo "-comp lz4" ;; lz4hc) echo "-comp lz4 -Xhc" ;;
	deflate6) echo "-comp gzip -Xcompression-level 6" ;;
	zstd3) echo "-comp zstd -Xcompression-level 3" ;;
	zstd15) echo "-comp zstd -Xcompression-level 15" ;;
	lzma6) echo "-comp xz" ;;
	esac
}

# one TOOL SETTING CORPUS CMD...: time RUNS builds, record the size.
declare -A SZ TM SPAN
one() {
	local tool=$1 set=$2 src=$3 t lo hi sz th=$THREADS
	shift 3
	read -r t lo hi <<< "$(median_of "$RUNS" "$IMG" "$@")"
	sz=$(stat -c %s "$IMG" 2>/dev/null || echo nan)
	[ "$t" = nan ] && sz=nan
	SZ[$tool]=$sz
	TM[$tool]=$t
	SPAN[$tool]="$lo-$hi"
	echo "$src,$set,$tool,$t,$sz" >> "$CSV"
	case $tool in mkfs.erofs*) th=$MKFS_THREADS ;; esac
	tsv_row "$src" "$set" "$tool" "$th" "$t" "$lo" "$hi" "$sz"
}

mib() { awk -v b="$1" 'BEGIN { if (b == "nan") print "nan"; else printf "%.1f", b / 1048576 }'; }

TOOLS=(kiln kiln-best kiln-min kiln-shift mkfs.erofs mkfs.erofs-best mkfs.erofs-48bit mkfs.erofs-mbx mksquashfs)
{
	echo "# bench/compress.sh $STAMP on $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# threads: kiln -j $THREADS, mkfs.erofs $MKFS_THREADS, mksquashfs -processors $THREADS; seconds: median (min-max) of $RUNS runs"
	echo "# kiln: $KILN -j $THREADS; kiln-best: + -C 131072 --fragments --dedupe; kiln-min: --layout classic -C 131072 --fragments --dedupe-shifted --metabox (Linux 6.17+); kiln-shift: --layout extents -C 262144 --fragments --dedupe-shifted --metabox"
	echo "# mkfs.erofs: ${MKFS_VER:-erofs-utils 1.5}$([ $MKFS_NEW = 1 ] && echo "; best: -C131072 -Efragments,dedupe --workers=$THREADS (fixed-output pclusters); 48bit: + -E48bit (not lz4/lz4hc)")$([ $MKFS_MBX = 1 ] && echo '; mbx: best + -m16384')"
	echo "# mksquashfs: -processors $THREADS -noappend, 128 KiB blocks"
	echo "# size_r: tool size / kiln-best size (above 1: kiln-best is smaller)"
} | tee "$TXT"
tsv_open "$TSV"
tsv_row "# title: compressed image size and build time"
tsv_row "# threads: kiln -j $THREADS, mkfs.erofs $MKFS_THREADS, mksquashfs -processors $THREADS; seconds: median (min-max) of $RUNS runs"
tsv_row "# x: setting"
tsv_row "# series: tool"
tsv_row "# plot: image_bytes MiB 1048576 image size"
tsv_row "# plot: seconds s 1 build time"
tsv_row table setting tool threads seconds seconds_min seconds_max image_bytes

for src in "${CORPORA[@]}"; do
	[ -d "$src" ] || continue
	tar -C "$src" -cf - . > /dev/null	# warm the page cache for everyone
	n=$(find "$src" | wc -l)
	mb=$(du -sm --apparent-size "$src" | cut -f1)
	{
		echo
		echo "## $src: $n entries, $mb MiB"
		printf '%-9s %-16s %9s %15s %11s %7s\n' setting tool seconds \
			"(min-max)" image_MiB size_r
	} | tee -a "$TXT"
	for set in $SETTINGS; do
		SZ=(); TM=(); SPAN=()
		kz=$(kiln_z "$set")
		one kiln "$set" "$src" "$KILN" build -q -j "$THREADS" -z "$kz" "$src" "$IMG"
		one kiln-best "$set" "$src" "$KILN" build -q -j "$THREADS" -z "$kz" -C 131072 \
			--fragments --dedupe "$src" "$IMG"
		one kiln-min "$set" "$src" "$KILN" build -q -j "$THREADS" -z "$kz" -C 131072 \
			--layout classic --fragments --dedupe-shifted --metabox \
			"$src" "$IMG"
		one kiln-shift "$set" "$src" "$KILN" build -q -j "$THREADS" -z "$kz" -C 262144 \
			--layout extents --fragments --dedupe-shifted --metabox \
			"$src" "$IMG"
		mz=$(mkfs_z "$set")
		if [ -n "$mz" ] && have mkfs.erofs; then
			one mkfs.erofs "$set" "$src" mkfs.erofs --quiet "-z$mz" \
				"${MKFS_WORKERS[@]}" "$IMG" "$src"
			if [ $MKFS_NEW = 1 ]; then
				e=-Efragments,dedupe
				one mkfs.erofs-best "$set" "$src" mkfs.erofs --quiet \
					"-z$mz" -C131072 "$e" "--workers=$THREADS" "$IMG" "$src"
				case $set in
				lz4*) ;;
				*) one mkfs.erofs-48bit "$set" "$src" mkfs.erofs \
					--quiet "-z$mz" -C131072 "$e,48bit" \
					"--workers=$THREADS" "$IMG" "$src" ;;
				esac
				# -m puts the root in the metabox: 48-bit layout
				if [ $MKFS_MBX = 1 ]; then
					one mkfs.erofs-mbx "$set" "$src" mkfs.erofs \
						--quiet "-z$mz" -C131072 "$e" -m16384 \
						"--workers=$THREADS" "$IMG" "$src"
				fi
			fi
		fi
		if have mksquashfs; then
			# shellcheck disable=SC2046
			one mksquashfs "$set" "$src" mksquashfs "$src" "$IMG" \
				$(squash_comp "$set") -processors "$THREADS" -noappend -quiet
		fi
		for tool in "${TOOLS[@]}"; do
			[ -n "${SZ[$tool]:-}" ] || continue
			printf '%-9s %-16s %9s %15s %11s %7s\n' "$set" "$tool" \
				"${TM[$tool]}" "(${SPAN[$tool]})" "$(mib "${SZ[$tool]}")" "$(ratio "${SZ[$tool]}" "${SZ[kiln-best]}")"
		done | tee -a "$TXT"
	done
done
rm -f "$IMG"
echo "results: $TXT, $CSV, $TSV" >&2
