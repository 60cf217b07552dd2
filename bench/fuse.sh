#!/usr/bin/env bash
# FUSE read benchmarks, side by side in one run on the same tree:
#   kiln mount, erofsfuse (both on mkfs.erofs's image), kiln mount of kiln's
#   own image, squashfuse_ll on an equivalent mksquashfs image, and the
#   kernel's EROFS mount as the reference; uncompressed and lz4hc.
#   A "disk" row runs each workload on mkfs.erofs's image file itself,
#   through no file system server: tar is `cat IMAGE`, the fio jobs read
#   the image file. For uncompressed data that is the ceiling any server
#   reading the image can reach from a cold cache on this machine.
# Workloads, each from a cold cache:
#   tar    the whole tree through tar (piped to cat: GNU tar skips reading
#          file data when it writes straight to /dev/null)
#   seq    fio sequential read of a ~1 GiB file, 128 KiB reads, 1 job
#   rand1  fio random 4 KiB reads of that file, 1 job, an eighth of the
#          file, no block twice (fio's random map): every read is cold
#   rand4  the same with 4 jobs, each in its own quarter of the file,
#          reading a sixteenth of the file
# --only zstd measures instead the case of compressed random reads: one
#   256 MiB file of C source (the Linux tree bench/prepare-corpus.sh
#   unpacks, else /usr/include; --corpus DIR picks another), built with
#   kiln build -z zstd:3 -C 131072, served to every system from that one
#   image; rand1 reads 64 MiB of it (default workload: rand1 only).
# fio: --readonly --direct=0 --ioengine=psync, at most $RUNTIME s a job.
# (Time-based random reads with --norandommap would soon be served from
# the page cache the first reads filled: they would measure how fast a
# server fills it, not how fast it answers a cold read.)
# Each measurement mounts afresh and drops caches first. On a shared or
# noisy machine each one runs --repeat times (default 3), in rounds that
# interleave the systems; tables give the median with min and max.
# Threads: the fio jobs say theirs (1, or 4 for rand4); each server runs
# with its defaults (kiln mount: up to 10 request threads, erofsfuse and
# squashfuse_ll: libfuse's multithreaded loop), the kernel with its own.
# Results: bench/out/fuse-<time>.txt (tables) and .tsv (bench/report.sh).
# KILN_BASE=/path/to/other/kiln adds a column "kiln-base" (before/after).
# Usage: bench/fuse.sh [--quick] [--only plain|lz4hc|zstd] [--repeat N] [--runtime S]
#                      [--systems "kernel kiln ..."] [--workloads "tar seq ..."]
#                      [--corpus DIR]
#        (root: mounts, drop_caches)
set -u
. "$(dirname "$0")/lib.sh"

QUICK=0
ONLY=
REPEAT=3
RUNTIME=
SYSTEMS=
CORPUS=
WORKLOADS=
USAGE="usage: $0 [--quick] [--only plain|lz4hc|zstd] [--repeat N] [--runtime S] [--systems LIST] [--workloads LIST] [--corpus DIR]"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	--workloads) WORKLOADS=$2; shift ;;
	--corpus) CORPUS=$2; shift ;;
	*) echo "$USAGE" >&2; exit 2 ;;
	esac
	shift
done
if [ "$ONLY" = zstd ]; then
	[ -n "$SYSTEMS" ] || SYSTEMS="kernel kiln erofsfuse"
	[ -n "$WORKLOADS" ] || WORKLOADS="rand1"
else
	[ -n "$SYSTEMS" ] || SYSTEMS="disk kernel kiln kiln-own erofsfuse squashfuse_ll"
	[ -n "$WORKLOADS" ] || WORKLOADS="tar seq rand1 rand4"
fi
[ -n "${KILN_BASE:-}" ] && [ "${SYSTEMS#*kiln-base}" = "$SYSTEMS" ] && SYSTEMS="$SYSTEMS kiln-base"
[ "$(id -u)" = 0 ] || { echo "$0: needs root (mounts, drop_caches)" >&2; exit 1; }
have fio || { echo "$0: fio not found" >&2; exit 1; }
[ -x "$KILN" ] || { echo "$0: no kiln at $KILN (set KILN=)" >&2; exit 1; }

BIG_MIB=1024; SMALL_FILES=8000
[ $QUICK = 1 ] && { BIG_MIB=256; SMALL_FILES=2000; }
[ -n "$RUNTIME" ] || { RUNTIME=20; [ $QUICK = 1 ] && RUNTIME=6; }

TREE=$OUT/fuse-tree-$BIG_MIB
IMG=$OUT/fuse-img-$BIG_MIB
MNT=$OUT/fuse-mnt
mkdir -p "$MNT" "$IMG"

# -- the tree: one big file (half random, half text) and many small files --
make_tree() {
	[ -f "$TREE/.complete" ] && return 0
	echo "== generating $TREE"
	rm -rf "$TREE"
	/usr/bin/python3 - "$TREE" "$BIG_MIB" "$SMALL_FILES" <<'PY'
import os, random, sys
root, big_mib, nsmall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(42)
words = [w.encode() for w in ("kiln erofs block inode cluster page cache "
         "fuse read write data tree image mount the of and a to\n").split(" ")]
text = b" ".join(rng.choice(words) for _ in range(800000))[:4 << 20]
def chunk(n):
    if rng.random() < 0.5:
        return rng.randbytes(n)
    o = rng.randrange(0, len(text) - n)
    return text[o:o + n]
os.makedirs(os.path.join(root, "small"))
with open(os.path.join(root, "big.bin"), "wb") as f:
    for _ in range(big_mib):
        f.write(chunk(1 << 20))
for i in range(nsmall):
    d = os.path.join(root, "small", "d%03d" % (i % 200))
    os.makedirs(d, exist_ok=True)
    n = int(rng.lognormvariate(8.5, 1.5)) % (1 << 20)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(chunk(n))
open(os.path.join(root, ".complete"), "w").close()
PY
	du -sh --apparent-size "$TREE"
}

# -- the zstd case: one 256 MiB file of C source -----------------------------
CSRC_MIB=256
CTREE=$OUT/fuse-csrc-$CSRC_MIB
make_csrc_tree() {
	[ -f "$CTREE/.complete" ] && return 0
	if [ -z "$CORPUS" ]; then
		for d in "$OUT"/corpus/linux-source-*/ /usr/include; do
			[ -d "$d" ] && { CORPUS=${d%/}; break; }
		done
	fi
	echo "== generating $CTREE from the .c and .h files of $CORPUS"
	rm -rf "$CTREE"
	mkdir -p "$CTREE"
	# sorted paths, concatenated, the corpus again from the start when
	# it holds less: the same bytes on every run
	/usr/bin/python3 - "$CORPUS" "$CTREE/csrc" "$CSRC_MIB" <<'PY' || return 1
import os, sys
root, out, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = []
for d, dirs, files in os.walk(root):
    dirs.sort()
    paths += [os.path.join(d, f) for f in sorted(files)
              if f.endswith((".c", ".h"))]
if not paths:
    sys.exit("no .c or .h files under " + root)
want, done = mib << 20, 0
with open(out, "wb") as f:
    while done < want:
        for p in paths:
            try:
                with open(p, "rb") as g:
                    b = g.read(want - done)
            except OSError:
                continue
            f.write(b)
            done += len(b)
            if done >= want:
                break
PY
	touch "$CTREE/.complete"
}

# -- images -----------------------------------------------------------------
# $zk, $ze and $zs hold several options each: split on purpose.
# shellcheck disable=SC2086
build_images() { # $1 = plain | lz4hc | zstd
	local m=$1 zk="" ze="" zs="-noI -noD -noF -noX"
	if [ "$m" = zstd ]; then
		make_csrc_tree || { echo "no C source tree" >&2; return; }
		[ -f "$IMG/kiln-zstd.erofs" ] ||
			"$KILN" build -q -z zstd:3 -C 131072 "$CTREE" "$IMG/kiln-zstd.erofs" >/dev/null ||
			{ echo "kiln build -z zstd:3 failed" >&2; rm -f "$IMG/kiln-zstd.erofs"; }
		return
	fi
	[ "$m" = lz4hc ] && { zk="-z lz4hc"; ze="-zlz4hc"; zs="-comp lz4 -Xhc"; }
	[ -f "$IMG/mkfs-$m.erofs" ] ||
		mkfs.erofs --quiet $ze "$IMG/mkfs-$m.erofs" "$TREE" ||
		{ echo "mkfs.erofs $ze failed" >&2; rm -f "$IMG/mkfs-$m.erofs"; }
	[ -f "$IMG/kiln-$m.erofs" ] ||
		"$KILN" build -q $zk "$TREE" "$IMG/kiln-$m.erofs" >/dev/null 2>&1 ||
		{ echo "kiln build $zk failed: no kiln-built image" >&2; rm -f "$IMG/kiln-$m.erofs"; }
	if have mksquashfs && [ ! -f "$IMG/$m.sqfs" ]; then
		mksquashfs "$TREE" "$IMG/$m.sqfs" -noappend -quiet -no-progress $zs >/dev/null ||
			{ echo "mksquashfs failed" >&2; rm -f "$IMG/$m.sqfs"; }
	fi
}

# -- mounting ---------------------------------------------------------------
wait_mounted() {
	for _ in $(seq 200); do
		mountpoint -q "$1" && return 0
		sleep 0.05
	done
	echo "mount at $1 did not appear" >&2
	return 1
}

# The image the EROFS systems serve in mode $1: mkfs.erofs's, or in the
# zstd case kiln's for all of them.
peer_image() {
	if [ "$1" = zstd ]; then echo "$IMG/kiln-zstd.erofs"; else echo "$IMG/mkfs-$1.erofs"; fi
}

# The big file the fio workloads read, and how much rand1 reads of it.
big_file() { if [ "$1" = zstd ]; then echo csrc; else echo big.bin; fi; }
rand1_mib() { if [ "$1" = zstd ]; then echo 64; else echo $((BIG_MIB / 8)); fi; }
big_mib() { if [ "$1" = zstd ]; then echo "$CSRC_MIB"; else echo "$BIG_MIB"; fi; }

# do_mount SYSTEM MODE: mounts on $MNT; returns 1 when not available.
do_mount() {
	local sys=$1 m=$2 pi
	pi=$(peer_image "$m")
	# disk: no mount, the workloads read the image file itself
	[ "$sys" = disk ] && { [ -f "$pi" ]; return; }
	case $sys in
	kernel)    [ -f "$pi" ] && mount_erofs "$pi" "$MNT" ;;
	kiln)      [ -f "$pi" ] && "$KILN" mount "$pi" "$MNT" ;;
	kiln-own)  [ -f "$IMG/kiln-$m.erofs" ] && "$KILN" mount "$IMG/kiln-$m.erofs" "$MNT" ;;
	kiln-base) [ -n "${KILN_BASE:-}" ] && [ -f "$pi" ] &&
			"$KILN_BASE" mount "$pi" "$MNT" ;;
	erofsfuse) have erofsfuse && [ -f "$pi" ] &&
			erofsfuse "$pi" "$MNT" >/dev/null 2>&1 ;;
	squashfuse_ll) have squashfuse_ll && [ -f "$IMG/$m.sqfs" ] &&
			squashfuse_ll "$IMG/$m.sqfs" "$MNT" ;;
	*) return 1 ;;
	esac || return 1
	wait_mounted "$MNT"
}

do_umount() {
	[ "${1:-}" = disk ] && return 0
	umount "$MNT" 2>/dev/null || fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	# let a FUSE server exit (and unmap its image) before the next mount
	for _ in $(seq 100); do mountpoint -q "$MNT" || break; sleep 0.05; done
	sleep 0.5
}

# Every measurement starts with a fresh mount and dropped caches. A fresh
# mount matters: a server that maps its image keeps the pages it touched
# resident (drop_caches skips mapped pages) until it exits.
# measure SYSTEM MODE WORKLOAD: prints seconds (tar), MiB/s (seq) or IOPS.
measure() {
	local sys=$1 m=$2 w=$3 v f mib
	local tar_cmd="cd '$MNT' && tar -cf - . | cat > /dev/null"
	f=$MNT/$(big_file "$m")
	mib=$(big_mib "$m")
	if [ "$sys" = disk ]; then
		f=$(peer_image "$m")
		tar_cmd="cat '$f' > /dev/null"
	fi
	do_mount "$sys" "$m" || { echo nan; return 1; }
	drop_caches
	case $w in
	tar)   v=$(time_cmd sh -c "$tar_cmd") ;;
	seq)   v=$(fio_run "seq-$sys-$m" "$f" --ioengine=psync --runtime="$RUNTIME" --rw=read --bs=128k --numjobs=1 | awk '{print $2}') ;;
	rand1) v=$(fio_run "rand1-$sys-$m" "$f" --ioengine=psync --runtime="$RUNTIME" --rw=randread --bs=4k --numjobs=1 --io_size="$(rand1_mib "$m")"m --randrepeat=1 | awk '{print $1}') ;;
	rand4) v=$(fio_run "rand4-$sys-$m" "$f" --ioengine=psync --runtime="$RUNTIME" --rw=randread --bs=4k --numjobs=4 --size=25% --offset_increment=25% --io_size=$((mib / 16))m --randrepeat=1 | awk '{print $1}') ;;
	esac
	do_umount "$sys"
	echo "$v"
}

# summarize MODE SYSTEM WORKLOAD: R = the median of every run that gave a
# figure, SPAN = "min-max" (nan when none did).
summarize() {
	local k=$1,$2,$3 med lo hi
	# shellcheck disable=SC2086 # the runs, one word each
	read -r med lo hi <<< "$(printf '%s\n' ${ALL[$k]:-} | grep -v nan | stats)"
	R[$k]=$med
	SPAN[$k]="$lo-$hi"
	LO[$k]=$lo
	HI[$k]=$hi
}

declare -A R ALL SPAN LO HI

# Rounds interleave the systems (round 1: every system, then round 2 ...)
# so that a burst of load elsewhere on the machine hits them all alike.
run_mode() { # $1 = plain | lz4hc
	local m=$1 sys w r v avail=""
	echo "== $m: building images"
	build_images "$m"
	for sys in $SYSTEMS; do
		if ! do_mount "$sys" "$m"; then
			echo "-- $sys: not available (missing tool or image)"
			continue
		fi
		do_umount "$sys"
		avail+=" $sys"
	done
	for r in $(seq "$REPEAT"); do
		echo "-- $m: round $r of $REPEAT:$avail"
		for w in $WORKLOADS; do
			for sys in $avail; do
				v=$(measure "$sys" "$m" "$w")
				ALL[$m,$sys,$w]+=" $v"
			done
		done
	done
	for sys in $avail; do
		for w in $WORKLOADS; do
			summarize "$m" "$sys" "$w"
		done
	done
}

# -- report -------------------------------------------------------------------
# rel WORKLOAD A B: how much better A is than B (above 1 = A is faster):
# B / A for tar (seconds), A / B for fio (MiB/s, IOPS).
rel() {
	if [ "$1" = tar ]; then ratio "$3" "$2"; else ratio "$2" "$3"; fi
}

declare -A UNIT=([tar]="tar s" [seq]="seq MiB/s" [rand1]="rand1 IOPS" [rand4]="rand4 IOPS")

print_mode() {
	local m=$1 sys w peer line
	echo
	if [ "$m" = zstd ]; then
		echo "== $m: one ${CSRC_MIB} MiB file of C source (kiln build -z zstd:3 -C 131072, every system serves that image), rand1 reads $(rand1_mib "$m") MiB, fio ${RUNTIME}s max, cold cache, median (min-max) of $REPEAT"
	else
		echo "== $m: ${BIG_MIB} MiB file, $SMALL_FILES small files, fio ${RUNTIME}s max, cold cache, median (min-max) of $REPEAT"
	fi
	echo "   threads: fio 1 job (seq, rand1), 4 jobs (rand4); servers with their defaults (kiln mount threads=10)"
	line=$(printf "%-14s" system)
	for w in $WORKLOADS; do line+=$(printf " %11s %17s %6s" "${UNIT[$w]}" "(min-max)" x); done
	echo "$line"
	for sys in $SYSTEMS; do
		[ -n "${R[$m,$sys,${WORKLOADS%% *}]:-}" ] || continue
		line=$(printf "%-14s" "$sys")
		for w in $WORKLOADS; do
			line+=$(printf " %11s %17s %6s" "${R[$m,$sys,$w]}" \
				"(${SPAN[$m,$sys,$w]})" \
				"$(rel "$w" "${R[$m,$sys,$w]}" "${R[$m,kernel,$w]:-0}")")
		done
		echo "$line"
	done
	for w in $WORKLOADS; do
		line="  every run, $w:"
		for sys in $SYSTEMS; do
			[ -n "${ALL[$m,$sys,$w]:-}" ] && line+=" $sys${ALL[$m,$sys,$w]};"
		done
		echo "$line"
	done
	# the targets: kiln against each FUSE peer
	for peer in $SYSTEMS; do
		case $peer in disk|kernel|kiln|kiln-own|kiln-base) continue ;; esac
		[ -n "${R[$m,$peer,${WORKLOADS%% *}]:-}" ] || continue
		line=$(printf "%-14s" "kiln/$peer")
		for w in $WORKLOADS; do
			line+=$(printf " %11s %17s %6s" "" "" "$(rel "$w" "${R[$m,kiln,$w]:-0}" "${R[$m,$peer,$w]}")")
		done
		echo "$line"
	done
}

declare -A COLUMN=([tar]=tar_s [seq]=seq_mib_s [rand1]=rand1_iops [rand4]=rand4_iops)
declare -A PLOT=([tar]="tar_s s 1 tar of the tree"
	[seq]="seq_mib_s MiB/s 1 sequential 128K reads, 1 job"
	[rand1]="rand1_iops IOPS 1 random 4K reads, 1 job"
	[rand4]="rand4_iops IOPS 1 random 4K reads, 4 jobs")

# One row per mode and system; a panel per workload in bench/report.sh.
write_tsv() {
	local m sys w row head=(table system)
	tsv_open "$1"
	tsv_row "# title: cold-cache reads, FUSE servers and the kernel (${BIG_MIB} MiB file, $SMALL_FILES small files)"
	tsv_row "# threads: fio 1 job (seq, rand1), 4 jobs (rand4); servers with their defaults (kiln mount threads=10); median (min-max) of $REPEAT rounds"
	tsv_row "# x: system"
	tsv_row "# series: -"
	for w in $WORKLOADS; do
		tsv_row "# plot: ${PLOT[$w]}"
		head+=("${COLUMN[$w]}" "${COLUMN[$w]}_min" "${COLUMN[$w]}_max")
	done
	tsv_row "${head[@]}"
	for m in $MODES; do
		for sys in $SYSTEMS; do
			[ -n "${R[$m,$sys,${WORKLOADS%% *}]:-}" ] || continue
			row=("$m" "$sys")
			for w in $WORKLOADS; do
				row+=("${R[$m,$sys,$w]}" "${LO[$m,$sys,$w]}" "${HI[$m,$sys,$w]}")
			done
			tsv_row "${row[@]}"
		done
	done
}

trap 'mountpoint -q "$MNT" && do_umount' EXIT
MODES="plain lz4hc"
[ -n "$ONLY" ] && MODES=$ONLY
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for m in $MODES; do run_mode "$m"; done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
write_tsv "$OUT/fuse-$STAMP.tsv"
{
	for m in $MODES; do print_mode "$m"; done
	echo
	echo "machine: $(nproc) CPUs, load average $LOAD_START at the start, $LOAD_END at the end"
} | tee "$OUT/fuse-$STAMP.txt"
echo
echo "x: ratio to the kernel's EROFS mount (higher is better; for tar, kernel time / time);"
echo "kiln/PEER rows: kiln mount against that FUSE server, same scale (2.00 = twice as fast)."
if [ "$MODES" = zstd ]; then
	echo "zstd: every system serves kiln build's image (-z zstd:3 -C 131072)."
	echo "The load average says how busy the machine was: on a shared one, figures move with it."
else
	echo "kiln and erofsfuse serve mkfs.erofs's image; kiln-own serves kiln build's image."
	echo "disk: the same workloads on mkfs.erofs's image file, no server (tar: cat of the image)."
	echo "  For plain data it bounds every server; for lz4hc it reads less than the tree holds."
fi
