# shellcheck shell=bash
# Shared helpers for bench/*.sh (sourced, not run).
# Peers come from PATH; kiln from $KILN or the default build directory.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KILN=${KILN:-$BENCH_ROOT/build/tools/kiln/kiln}
READBENCH=${READBENCH:-$BENCH_ROOT/build/bench/readbench}
OUT=${OUT:-$BENCH_ROOT/bench/out}
mkdir -p "$OUT"

have() { command -v "$1" >/dev/null 2>&1; }

# Cold-cache figures are only honest with the caches dropped: a run that
# cannot drop them stops here (exit 1) rather than measure warm reads.
drop_caches() {
	sync
	if ! { [ -w /proc/sys/vm/drop_caches ] &&
	       echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
		echo "$0: cannot drop the page cache (needs root): stopping," \
			"cold-cache figures would be warm ones" >&2
		exit 1
	fi
}

# Wall seconds of a command (stdout/stderr discarded), as a decimal.
time_cmd() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; echo nan; return 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l | awk '{printf "%.3f", $1}'
}

# median_of N CLEAN CMD...: run CMD N times (CLEAN, a path, removed before
# each run) and print "MEDIAN MIN MAX" of the wall seconds; "nan nan nan"
# if any run failed. N odd gives a true median; even N, the mean of the
# middle two.
median_of() {
	local n=$1 clean=$2 t times=()
	shift 2
	for _ in $(seq "$n"); do
		rm -f "$clean"
		t=$(time_cmd "$@") || { echo nan nan nan; return 1; }
		times+=("$t")
	done
	printf '%s\n' "${times[@]}" | stats
}

# stats: "MEDIAN MIN MAX" of the numbers on stdin, one a line (three
# significant digits, whole numbers from 100 up).
stats() {
	sort -g | awk '
	function f(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x) }
	{ v[NR] = $1 } END {
		if (!NR) { print "nan nan nan"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print f(m), f(v[1]), f(v[NR]) }'
}

# Machine-readable results for bench/report.sh: tsv_open FILE, then the
# "# key: value" lines (title, threads, x, series, plot) and the header
# with tsv_row, then one tsv_row per measurement. bench/README.md has the
# format.
tsv_row() {
	local IFS=$'\t'
	echo "$*" >> "$TSV"
}
tsv_open() {
	TSV=$1
	: > "$TSV"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# mount_erofs IMAGE DIR [OPTS]
mount_erofs() {
	mkdir -p "$2"
	mount -t erofs -o "loop,ro${3:+,$3}" "$1" "$2"
}

umount_quiet() { umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true; }

# fio_run NAME FILE ARGS... : prints "IOPS MiB/s" of a read job.
fio_run() {
	local name=$1 file=$2
	shift 2
	fio --name="$name" --filename="$file" --readonly --direct=0 \
		--group_reporting --output-format=json "$@" > "$OUT/fio-$name.json" 2>/dev/null ||
		{ echo "nan nan"; return 1; }
	/usr/bin/python3 - "$OUT/fio-$name.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print("%.0f %.1f" % (j["iops"], j["bw_bytes"] / 1048576.0))
PY
}

# default_corpora QUICK: fill CORPORA, when no --corpus was given, with
# /usr/share/doc, and unless QUICK is 1 also /usr/lib/x86_64-linux-gnu and
# the Linux trees bench/prepare-corpus.sh unpacked.
default_corpora() {
	[ ${#CORPORA[@]} -eq 0 ] || return 0
	CORPORA=(/usr/share/doc)
	[ "$1" = 1 ] && return 0
	CORPORA+=(/usr/lib/x86_64-linux-gnu)
	local d
	for d in "$OUT"/corpus/linux-source-*/; do
		[ -d "$d" ] && CORPORA+=("${d%/}")
	done
	return 0
}
