#!/usr/bin/env bash
# Build benchmark, side by side in one run: wall time (median, min and max
# of N runs) and image size of an uncompressed image of the same tree made
# by, each with $THREADS threads (default 2; mkfs.erofs before 1.8 has one)
#   kiln build -j THREADS              (this tree's build, $KILN)
#   mkfs.erofs [--workers=THREADS]     (erofs-utils, from PATH)
#   mksquashfs -noI -noD -noF -noX -processors THREADS (uncompressed reference)
# with ratios kiln/peer. Corpora default to /usr/share/doc and
# /usr/lib/x86_64-linux-gnu, plus the Linux source tree if
# bench/prepare-corpus.sh unpacked it.
# Usage: bench/build.sh [--runs N] [--quick] [--corpus DIR]...
# Results: bench/out/build-<time>.txt (table), .csv and .tsv (for
# bench/report.sh).
set -u
. "$(dirname "$0")/lib.sh"

RUNS=3
THREADS=${THREADS:-2}
CORPORA=()
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--quick) RUNS=1 ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--runs N] [--quick] [--corpus DIR]..." >&2; exit 2 ;;
	esac
	shift
done
default_corpora 0
[ -x "$KILN" ] || { echo "$0: no kiln at $KILN (set KILN=)" >&2; exit 1; }

IMG=$OUT/build-images
mkdir -p "$IMG"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/build-$STAMP.txt
CSV=$OUT/build-$STAMP.csv

# The tools, as "name|command with SRC and IMG placeholders".
TOOLS=("kiln|$KILN build -q -j $THREADS SRC IMG")
MKFS_THREADS=1
if have mkfs.erofs && mkfs.erofs --help 2>&1 | grep -q -- '--workers'; then
	MKFS_THREADS=$THREADS
	TOOLS+=("mkfs.erofs|mkfs.erofs --quiet --workers=$THREADS IMG SRC")
elif have mkfs.erofs; then
	TOOLS+=("mkfs.erofs|mkfs.erofs --quiet IMG SRC")
else
	echo "warning: mkfs.erofs not in PATH: column skipped" >&2
fi
if have mksquashfs; then
	TOOLS+=("mksquashfs|mksquashfs SRC IMG -noI -noD -noF -noX -processors $THREADS -noappend -quiet -no-progress")
else
	echo "warning: mksquashfs not in PATH: column skipped" >&2
fi

{
	echo "# kiln build benchmark, $STAMP, median (min-max) of $RUNS runs, $(nproc) cores"
	echo "# threads: kiln -j $THREADS, mkfs.erofs $MKFS_THREADS, mksquashfs -processors $THREADS"
	echo "# kiln: $KILN ($("$KILN" --version 2>/dev/null))"
	have mkfs.erofs && echo "# $(mkfs.erofs 2>&1 | grep -m1 -E '^mkfs.erofs [0-9]')"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	have mksquashfs && echo "# $(mksquashfs -version 2>&1 | head -n1)"
} | tee "$TXT"
echo "corpus,files,input_bytes,tool,seconds,image_bytes" > "$CSV"
tsv_open "$OUT/build-$STAMP.tsv"
tsv_row "# title: uncompressed image size and build time"
tsv_row "# threads: kiln -j $THREADS, mkfs.erofs $MKFS_THREADS, mksquashfs -processors $THREADS; median (min-max) of $RUNS runs"
tsv_row "# x: tool"
tsv_row "# series: -"
tsv_row "# plot: image_bytes MiB 1048576 image size"
tsv_row "# plot: seconds s 1 build time"
tsv_row table tool threads seconds seconds_min seconds_max image_bytes

for src in "${CORPORA[@]}"; do
	[ -d "$src" ] || { echo "skip $src: not a directory" >&2; continue; }
	files=$(find "$src" | wc -l)
	bytes=$(du -sb "$src" | cut -f1)
	# Read the tree once so no tool pays for a cold cache.
	tar -C "$src" -cf - . 2>/dev/null | cat > /dev/null
	declare -A SEC=() SPAN=() SIZE=()
	for entry in "${TOOLS[@]}"; do
		name=${entry%%|*}
		tmpl=${entry#*|}
		out=$IMG/$name.img
		cmd=${tmpl//SRC/$src}
		cmd=${cmd//IMG/$out}
		# shellcheck disable=SC2086
		read -r med lo hi <<< "$(median_of "$RUNS" "$out" $cmd)"
		SEC[$name]=$med
		SPAN[$name]="$lo-$hi"
		SIZE[$name]=$(stat -c %s "$out" 2>/dev/null || echo 0)
		echo "$src,$files,$bytes,$name,${SEC[$name]},${SIZE[$name]}" >> "$CSV"
		th=$THREADS
		[ "$name" = mkfs.erofs ] && th=$MKFS_THREADS
		tsv_row "$src" "$name" "$th" "$med" "$lo" "$hi" "${SIZE[$name]}"
	done
	{
		printf '\n== %s: %s entries, %s MiB\n' "$src" "$files" \
			"$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
		printf '%-12s %10s %15s %12s %14s %14s\n' tool "time s" "(min-max)" \
			"image MiB" "kiln/x time" "kiln/x size"
		for entry in "${TOOLS[@]}"; do
			name=${entry%%|*}
			printf '%-12s %10s %15s %12s %14s %14s\n' "$name" "${SEC[$name]}" \
				"(${SPAN[$name]})" \
				"$(awk -v b="${SIZE[$name]}" 'BEGIN { printf "%.1f", b / 1048576 }')" \
				"$(ratio "${SEC[kiln]}" "${SEC[$name]}")" \
				"$(ratio "${SIZE[kiln]}" "${SIZE[$name]}")"
		done
	} | tee -a "$TXT"
	unset SEC SPAN SIZE
done
rm -f "$IMG"/*.img
echo
echo "results: $TXT, $CSV, $TSV"
