#!/usr/bin/env bash
# Parallel compressed builds side by side: wall time, peak RSS and size of
#   kiln build -j2 (with and without --fragments), mkfs.erofs,
#   mksquashfs -processors 2, tar | zstd -T2
# at zstd level 3, zstd level 15 and lz4hc, on each corpus; then peak RSS
# per million files on a generated tree of tiny files. A mkfs.erofs with
# --workers (erofs-utils 1.8 and later, first on PATH) runs every setting
# with 128 KiB pclusters, -Efragments,dedupe and --workers=2.
#
# Each figure: the median of --runs N (default 3) with the min and max of
# the wall seconds; peak RSS is the largest of the runs.
# Usage: bench/parallel.sh [--quick] [--runs N] [--classic-zstd] [--files N] [--corpus DIR]...
#   --quick     /usr/share/doc only, 20,000 generated files
#   --files N   generated tiny files (default 200,000; RSS is scaled to 1M;
#               0: none)
#   --classic-zstd  also kiln's classic layout with zstd (slow: no native
#               fixed-output zstd, each 4 KiB pcluster searches prefixes)
# Ratios compare each tool with kiln-ext (kiln, 128 KiB extents); runs
# over LIMIT_S seconds (default 900) are cut off and shown as nan.
# SETTINGS="zstd15 lz4hc" runs only those settings (default: all three).
# Results: bench/out/parallel-<time>.txt (table), .csv and .tsv.
set -eu
. "$(dirname "$0")/lib.sh"

CORPORA=()
FILES=200000
LIMIT_S=${LIMIT_S:-900}	# a run taking longer is reported as nan
QUICK=0
CLASSIC_ZSTD=0
RUNS=3
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; FILES=20000 ;;
	--runs) RUNS=$2; shift ;;
	--classic-zstd) CLASSIC_ZSTD=1 ;;
	--files) FILES=$2; shift ;;
	--corpus) CORPORA+=("$2"); shift ;;
	*) echo "usage: $0 [--quick] [--runs N] [--classic-zstd] [--files N] [--corpus DIR]..." >&2; exit 2 ;;
	esac
	shift
done
default_corpora $QUICK
[ -x "$KILN" ] || { echo "no kiln at $KILN (build first or set KILN)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (package time)" >&2; exit 1; }

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/parallel-$STAMP.txt
CSV=$OUT/parallel-$STAMP.csv
WORK=$OUT/parallel-work
mkdir -p "$WORK"
echo "corpus,setting,tool,seconds,peak_rss_kib,image_bytes,cpu_seconds" > "$CSV"

# measure_once OUTFILE CMD...: one measured run; prints "seconds rss_kib
# bytes cpu_seconds" (user + system: the machine may be shared, wall time
# not).
measure_once() {
	local out=$1 tlog=$WORK/time.log
	shift
	rm -f "$out"
	if ! timeout "$LIMIT_S" /usr/bin/time -v -o "$tlog" "$@" >/dev/null 2>"$WORK/err.log"; then
		echo "FAILED: $* ($(tail -n1 "$WORK/err.log"))" >&2
		echo "nan nan nan nan"
		return
	fi
	awk -v f="$out" '
		/Elapsed \(wall clock\)/ {
			n = split($NF, t, ":"); s = 0
			for (i = 1; i <= n; i++) s = s * 60 + t[i]
		}
		/Maximum resident set size/ { rss = $NF }
		/User time \(seconds\)|System time \(seconds\)/ { cpu += $NF }
		END {
			cmd = "stat -c %s " f; cmd | getline sz; close(cmd)
			printf "%.2f %d %d %.2f\n", s, rss, sz, cpu
		}' "$tlog"
}

# measure OUTFILE CMD...: RUNS runs; prints "seconds rss_kib bytes
# cpu_seconds seconds_min seconds_max": median seconds and CPU, the
# largest peak RSS, the size of the last image.
measure() {
	local runs="" r
	for _ in $(seq "$RUNS"); do
		r=$(measure_once "$@")
		runs+="$r"$'\n'
	done
	local good sm slo shi cm rss b
	good=$(awk 'NF && $1 != "nan"' <<< "$runs")
	[ -n "$good" ] || { echo "nan nan nan nan nan nan"; return; }
	read -r sm slo shi <<< "$(awk '{ print $1 }' <<< "$good" | stats)"
	read -r cm _ _ <<< "$(awk '{ print $4 }' <<< "$good" | stats)"
	rss=$(awk '$2 > m { m = $2 } END { print m + 0 }' <<< "$good")
	b=$(tail -n1 <<< "$good" | awk '{ print $3 }')
	echo "$sm $rss $b $cm $slo $shi"
}

# The tar pipeline measured as one command (RSS: the larger of the two).
tar_zstd() { tar -C "$1" -cf - . | zstd -q -T2 "-$2" -o "$3" -f; }
tar_lz4() { tar -C "$1" -cf - . | lz4 -q -9 - "$2"; }
export -f tar_zstd tar_lz4

SETTINGS=${SETTINGS:-zstd3 zstd15 lz4hc}
MKFS_VER=$(mkfs.erofs -V 2>/dev/null | head -n1 | sed 's/^mkfs.erofs *//')
# erofs-utils with worker threads also has zstd, fragments and dedupe
MKFS_MT=0
if have mkfs.erofs && mkfs.erofs --help 2>&1 | grep -q -- '--workers'; then
	MKFS_MT=1
fi
{
	echo "# bench/parallel.sh $STAMP on $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# threads: kiln -j2; mksquashfs -processors 2; tar | zstd -T2 (lz4hc: tar | lz4 -9, single-threaded); median (min-max) of $RUNS runs"
	if [ $MKFS_MT = 1 ]; then
		echo "# mkfs.erofs: ${MKFS_VER:-unknown}: -C131072 -Efragments,dedupe --workers=2"
	else
		echo "# mkfs.erofs: ${MKFS_VER:-unknown}: no multithreaded compression option and no zstd in this version"
	fi
	echo "# kiln-ext: --layout extents -C 131072; kiln-frag: the same with --fragments;"
	echo "# kiln: classic 4 KiB pclusters"
	echo "# ratio columns: tool / kiln-ext (above 1: kiln-ext is faster, leaner or smaller)"
} | tee "$TXT"
tsv_open "$OUT/parallel-$STAMP.tsv"
tsv_row "# title: parallel compressed builds: time, peak memory, size"
tsv_row "# threads: kiln -j2, mkfs.erofs --workers=2 (one thread without it), mksquashfs -processors 2, zstd -T2, lz4 1; median (min-max) of $RUNS runs"
tsv_row "# x: setting"
tsv_row "# series: tool"
tsv_row "# plot: seconds s 1 build time"
tsv_row "# plot: peak_rss_kib MiB 1024 peak memory"
tsv_row "# plot: image_bytes MiB 1048576 image size"
tsv_row table setting tool seconds seconds_min seconds_max peak_rss_kib image_bytes cpu_seconds

for src in "${CORPORA[@]}"; do
	[ -d "$src" ] || continue
	bytes=$(du -sb "$src" | cut -f1)
	nfiles=$(find "$src" | wc -l)
	tar -C "$src" -cf - . > /dev/null 2>&1 || true	# warm the cache
	{
		echo
		echo "## $src: $nfiles entries, $((bytes / 1048576)) MiB"
		printf "%-9s %-11s %8s %13s %8s %10s %12s %7s %9s %7s %7s\n" setting \
			tool seconds "(min-max)" cpu_s peak_MiB image_MiB "in/out" \
			t_ratio rss_r size_r
	} | tee -a "$TXT"
	for setting in $SETTINGS; do
		case $setting in
		zstd3) kz=zstd:3; sq="-comp zstd -Xcompression-level 3"; zl=3
			mz=zstd,level=3 ;;
		zstd15) kz=zstd:15; sq="-comp zstd -Xcompression-level 15"; zl=15
			mz=zstd,level=15 ;;
		lz4hc) kz=lz4hc; sq="-comp lz4 -Xhc"; zl=; mz=lz4hc ;;
		*) echo "unknown setting $setting" >&2; exit 2 ;;
		esac
		declare -A R=()
		# 128 KiB extents, as squashfs's default block size
		R[kiln-ext]=$(measure "$WORK/k.erofs" "$KILN" build -q -j2 -z "$kz" \
			--layout extents -C 131072 "$src" "$WORK/k.erofs")
		R[kiln-frag]=$(measure "$WORK/k.erofs" "$KILN" build -q -j2 -z "$kz" \
			--layout extents -C 131072 --fragments "$src" "$WORK/k.erofs")
		# classic 4 KiB pclusters, as mkfs.erofs's default (zstd has no
		# native fixed-output mode: its prefix search is slow, so the
		# classic zstd rows run only with --classic-zstd)
		if [ "$setting" = lz4hc ] || [ "$CLASSIC_ZSTD" = 1 ]; then
			R[kiln]=$(measure "$WORK/k.erofs" "$KILN" build -q -j2 \
				-z "$kz" "$src" "$WORK/k.erofs")
		fi
		if [ $MKFS_MT = 1 ]; then
			R[mkfs.erofs]=$(measure "$WORK/m.erofs" mkfs.erofs --quiet \
				-z"$mz" -C131072 -Efragments,dedupe --workers=2 \
				"$WORK/m.erofs" "$src")
		elif [ "$setting" = lz4hc ] && have mkfs.erofs; then
			R[mkfs.erofs]=$(measure "$WORK/m.erofs" mkfs.erofs --quiet \
				-zlz4hc "$WORK/m.erofs" "$src")
		fi
		if have mksquashfs; then
			# shellcheck disable=SC2086
			R[mksquashfs]=$(measure "$WORK/s.sqfs" mksquashfs "$src" \
				"$WORK/s.sqfs" $sq -processors 2 -noappend -quiet)
		fi
		if [ -n "$zl" ]; then
			R[tar+zstd]=$(measure "$WORK/t.tzst" bash -c \
				"tar_zstd '$src' $zl '$WORK/t.tzst'")
		elif have lz4; then
			R[tar+lz4]=$(measure "$WORK/t.tlz4" bash -c \
				"tar_lz4 '$src' '$WORK/t.tlz4'")
		fi
		read -r ks kr kb _ <<< "${R[kiln-ext]}"
		for tool in kiln-ext kiln-frag kiln mkfs.erofs mksquashfs tar+zstd tar+lz4; do
			[ -n "${R[$tool]:-}" ] || continue
			read -r s r b c lo hi <<< "${R[$tool]}"
			tsv_row "$src" "$setting" "$tool" "$s" "$lo" "$hi" "$r" "$b" "$c"
			printf "%-9s %-11s %8s %13s %8s %10.1f %12.1f %7s %9s %7s %7s\n" \
				"$setting" "$tool" "$s" "($lo-$hi)" "$c" "$(echo "$r/1024" | bc -l)" \
				"$(echo "$b/1048576" | bc -l)" "$(ratio "$bytes" "$b")" \
				"$(ratio "$s" "$ks")" "$(ratio "$r" "$kr")" \
				"$(ratio "$b" "$kb")" | tee -a "$TXT"
			echo "$src,$setting,$tool,$s,$r,$b,$c" >> "$CSV"
		done
		unset R
	done
done

# Peak RSS per million files: a tree of $FILES tiny files, 1000 a directory.
if [ "$FILES" -le 0 ]; then		# --files 0: corpora only
	rm -f "$WORK"/*.erofs "$WORK"/*.sqfs "$WORK"/t.*
	echo "results: $TXT"
	exit 0
fi
TREE=$WORK/tiny-$FILES
if [ ! -d "$TREE" ]; then
	/usr/bin/python3 - "$TREE" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 1000))
    if i % 1000 == 0:
        os.mkdir(d)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(b"x" * (i % 64))
PY
fi
mkdir -p "$WORK/empty"
# warm the cache: after the corpora, the first build would read the tree's
# inodes from disk and time that (14 s against 2 s here)
tar -C "$TREE" -cf - . | cat > /dev/null
{
	echo
	echo "## $FILES tiny files (0..63 bytes, 1000 a directory): peak RSS"
	echo "# per 1M files: (peak - peak of the same build of an empty tree) scaled to 1M"
	printf "%-34s %8s %10s %10s %14s\n" build seconds peak_MiB base_MiB MiB_per_1M_files
} | tee -a "$TXT"
tiny_row() {
	local name=$1 s r b r0
	shift
	read -r _ r0 _ _ <<< "$(measure "$WORK/tiny.img" "$@" "$WORK/empty")"
	read -r s r b _ <<< "$(measure "$WORK/tiny.img" "$@" "$TREE")"
	printf "%-34s %8s %10.1f %10.1f %14.1f\n" "$name" "$s" "$(echo "$r/1024" | bc -l)" \
		"$(echo "$r0/1024" | bc -l)" \
		"$(echo "($r-$r0)/1024*1000000/$FILES" | bc -l)" | tee -a "$TXT"
	echo "tiny-$FILES,$name,$s,$r,$b" >> "$CSV"
}
kiln_tiny() { "$KILN" build -q "${@:2}" "$1" "$WORK/tiny.img"; }
mkfs_tiny() { mkfs.erofs --quiet "$WORK/tiny.img" "$1"; }
export -f kiln_tiny mkfs_tiny
export KILN WORK
for opts in "-j2" "-j2 -z zstd:3" "-j2 -z lz4hc --memory-limit 16M"; do
	tiny_row "kiln $opts" bash -c "kiln_tiny \"\$0\" $opts"
done
# the inner shell expands "$0", not this one
# shellcheck disable=SC2016
have mkfs.erofs && tiny_row "mkfs.erofs (uncompressed)" bash -c 'mkfs_tiny "$0"'

rm -f "$WORK"/*.erofs "$WORK"/*.sqfs "$WORK"/t.* "$WORK"/tiny.img
echo "results: $TXT"
