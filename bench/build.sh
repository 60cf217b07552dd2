#!/usr/bin/env bash
# Build benchmark, side by side in one run: wall time (best of N) and image
# size of an uncompressed image of the same tree made by
#   kiln build                         (this tree's build, $KILN)
#   mkfs.erofs                         (erofs-utils, from PATH)
#   mksquashfs -noI -noD -noF -noX -processors 2   (uncompressed reference)
# with ratios kiln/peer. Corpora default to /usr/share/doc and
# /usr/lib/x86_64-linux-gnu, plus the Linux source tree if
# bench/prepare-corpus.sh unpacked it.
# Usage: bench/build.sh [--runs N] [--quick] [--corpus DIR]...
# Results: bench/out/build-<time>.txt (table) and .csv.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=3
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
TOOLS=("kiln|$KILN build -q SRC IMG")
if have mkfs.erofs; then
	TOOLS+=("mkfs.erofs|mkfs.erofs --quiet IMG SRC")
else
	echo "warning: mkfs.erofs not in PATH: column skipped" >&2
fi
if have mksquashfs; then
	TOOLS+=("mksquashfs|mksquashfs SRC IMG -noI -noD -noF -noX -processors 2 -noappend -quiet -no-progress")
else
	echo "warning: mksquashfs not in PATH: column skipped" >&2
fi

# best_of N CMD...: the smallest wall time of N runs (image removed before
# each), or "nan" if any run failed.
best_of() {
	local n=$1 out=$2 best=nan t
	shift 2
	for _ in $(seq "$n"); do
		rm -f "$out"
		t=$(time_cmd "$@") || { echo nan; return 1; }
		best=$(awk -v a="$best" -v b="$t" 'BEGIN { if (a == "nan" || b < a) print b; else print a }')
	done
	echo "$best"
}

{
	echo "# kiln build benchmark, $STAMP, best of $RUNS, $(nproc) cores"
	echo "# kiln: $KILN ($("$KILN" --version 2>/dev/null))"
	have mkfs.erofs && echo "# $(mkfs.erofs 2>&1 | grep -m1 -E '^mkfs.erofs [0-9]')"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	have mksquashfs && echo "# $(mksquashfs -version 2>&1 | head -n1)"
} | tee "$TXT"
echo "corpus,files,input_bytes,tool,seconds,image_bytes" > "$CSV"

for src in "${CORPORA[@]}"; do
	[ -d "$src" ] || { echo "skip $src: not a directory" >&2; continue; }
	files=$(find "$src" | wc -l)
	bytes=$(du -sb "$src" | cut -f1)
	# Read the tree once so no tool pays for a cold cache.
	tar -C "$src" -cf - . 2>/dev/null | cat > /dev/null
	declare -A SEC=() SIZE=()
	for entry in "${TOOLS[@]}"; do
		name=${entry%%|*}
		tmpl=${entry#*|}
		out=$IMG/$name.img
		cmd=${tmpl//SRC/$src}
		cmd=${cmd//IMG/$out}
		# shellcheck disable=SC2086
		SEC[$name]=$(best_of "$RUNS" "$out" $cmd)
		SIZE[$name]=$(stat -c %s "$out" 2>/dev/null || echo 0)
		echo "$src,$files,$bytes,$name,${SEC[$name]},${SIZE[$name]}" >> "$CSV"
	done
	{
		printf '\n== %s: %s entries, %s MiB\n' "$src" "$files" \
			"$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
		printf '%-12s %10s %12s %14s %14s\n' tool "time s" "image MiB" \
			"kiln/x time" "kiln/x size"
		for entry in "${TOOLS[@]}"; do
			name=${entry%%|*}
			printf '%-12s %10s %12s %14s %14s\n' "$name" "${SEC[$name]}" \
				"$(awk -v b="${SIZE[$name]}" 'BEGIN { printf "%.1f", b / 1048576 }')" \
				"$(ratio "${SEC[kiln]}" "${SEC[$name]}")" \
				"$(ratio "${SIZE[kiln]}" "${SIZE[$name]}")"
		done
	} | tee -a "$TXT"
	unset SEC SIZE
done
rm -f "$IMG"/*.img
echo
echo "results: $TXT, $CSV"
