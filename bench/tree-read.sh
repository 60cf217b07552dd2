#!/usr/bin/env bash
# What an image's layout costs readers of a whole tree, side by side in one
# run: each image is mounted by the kernel (squashfs images too) and read
#   tar     `tar -cf - . | cat` of the whole mount (GNU tar skips reading
#           file data when it writes to /dev/null itself), cold cache;
#   small   the same N small files (< 64 KiB, a fixed random sample of the
#           source, seed 1) read one after another in random order, cold
#           cache: what each small-file read costs when the files around it
#           were not read (packed-inode and fragment pcluster sizes).
# Every figure is the median (min-max) of --runs N (default 3), caches
# dropped before each run.
#
# Usage: bench/tree-read.sh [--runs N] [--files N] SOURCE LABEL=IMAGE...
#   LABEL=IMAGE: an EROFS or squashfs image of SOURCE (the type is read off
#   the image). Root is needed for the mounts.
# Results: bench/out/tree-read-<time>.txt and .tsv (for bench/report.sh).
set -eu
. "$(dirname "$0")/lib.sh"

RUNS=3
FILES=500
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--files) FILES=$2; shift ;;
	-*) echo "usage: $0 [--runs N] [--files N] SOURCE LABEL=IMAGE..." >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
[ $# -ge 2 ] || { echo "usage: $0 [--runs N] [--files N] SOURCE LABEL=IMAGE..." >&2; exit 2; }
SRC=$1
shift
[ -d "$SRC" ] || { echo "$0: $SRC: not a directory" >&2; exit 2; }

MNT=$OUT/mnt-tree-read
LIST=$OUT/tree-read-files.txt
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/tree-read-$STAMP.txt
tsv_open "$OUT/tree-read-$STAMP.tsv"

# The sample: N regular files under 64 KiB, in a random order fixed by the
# seed, as paths relative to the source (and so to every mount).
/usr/bin/python3 - "$SRC" "$FILES" > "$LIST" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
small = []
for d, dirs, files in os.walk(root):
    dirs.sort()
    for f in sorted(files):
        p = os.path.join(d, f)
        st = os.lstat(p)
        if os.path.isfile(p) and not os.path.islink(p) and 0 < st.st_size < 65536:
            small.append(os.path.relpath(p, root))
rng = random.Random(1)
for p in rng.sample(small, min(n, len(small))):
    print(p)
EOF
nfiles=$(wc -l < "$LIST")

fstype() {
	case $(head -c 4 "$1" | od -An -tx1 | tr -d ' ') in
	68737173) echo squashfs ;;
	*) echo erofs ;;
	esac
}

# read_small: cat each listed file, in the list's order, to nowhere.
read_small() {
	(cd "$MNT" && while IFS= read -r p; do cat -- "$p"; done < "$LIST") > /dev/null
}

# timed LABEL WHAT CMD...: RUNS cold runs of CMD, median (min-max) seconds.
timed() {
	local times=() t
	shift 2
	for _ in $(seq "$RUNS"); do
		drop_caches
		t=$(time_cmd "$@") || return 1
		times+=("$t")
	done
	printf '%s\n' "${times[@]}" | stats
}

{
	echo "# tree reads: $SRC, $nfiles small files, median (min-max) of $RUNS cold runs"
	echo "# $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-24s %12s %22s %22s\n' image bytes "tar s" "small files s"
} | tee "$TXT"
tsv_row "# title: whole-tree reads of kernel mounts: full tar and $nfiles small files, cold cache"
tsv_row "# threads: 1 (one reader)"
tsv_row "# x: image"
tsv_row "# series: workload"
tsv_row "# plot: seconds s 1 wall time"
tsv_row table image workload seconds seconds_min seconds_max

for arg in "$@"; do
	label=${arg%%=*}
	img=${arg#*=}
	[ -f "$img" ] || { echo "$0: $img: no such image" >&2; exit 2; }
	mkdir -p "$MNT"
	mount -t "$(fstype "$img")" -o loop,ro "$img" "$MNT"
	read -r tm tlo thi <<< "$(timed "$label" tar sh -c "cd '$MNT' && tar -cf - . | cat > /dev/null")"
	read -r sm slo shi <<< "$(timed "$label" small read_small)"
	# a reader that has just exited can hold the mount for a moment
	umount "$MNT" 2>/dev/null || { sleep 2; umount "$MNT"; } || umount -l "$MNT"
	printf '%-24s %12s %22s %22s\n' "$label" "$(stat -c %s "$img")" \
		"$tm ($tlo-$thi)" "$sm ($slo-$shi)" | tee -a "$TXT"
	tsv_row row "$label" tar "$tm" "$tlo" "$thi"
	tsv_row row "$label" small "$sm" "$slo" "$shi"
done
echo "results: $TXT"
