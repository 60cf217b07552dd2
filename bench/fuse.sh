#!/usr/bin/env bash
# FUSE read benchmarks, side by side in one run on the same tree:
#   kiln mount, erofsfuse (both on mkfs.erofs's image), kiln mount of kiln's
#   own image, squashfuse_ll on an equivalent mksquashfs image, and the
#   kernel's EROFS mount as the reference; uncompressed and lz4hc.
# Workloads, each from a cold cache:
#   tar    the whole tree through tar (piped to cat: GNU tar skips reading
#          file data when it writes straight to /dev/null)
#   seq    fio sequential read of a ~1 GiB file, 128 KiB reads, 1 job
#   rand1  fio random 4 KiB reads of that file, 1 job
#   rand4  the same with 4 jobs
# fio: --readonly --direct=0 --ioengine=psync, at most $RUNTIME s a job.
# Each measurement mounts afresh and drops caches first. On a shared or
# noisy machine each one runs --repeat times (default 3) and the best is
# kept (shortest tar, highest fio).
# Usage: bench/fuse.sh [--quick] [--only plain|lz4hc] [--repeat N] [--runtime S]
#        (root: mounts, drop_caches)
set -u
. "$(dirname "$0")/lib.sh"

QUICK=0
ONLY=
REPEAT=3
RUNTIME=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	*) echo "usage: $0 [--quick] [--only plain|lz4hc] [--repeat N] [--runtime S]" >&2; exit 2 ;;
	esac
	shift
done
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
if [ ! -f "$TREE/.complete" ]; then
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
fi
du -sh --apparent-size "$TREE"

# -- images -----------------------------------------------------------------
build_images() { # $1 = plain | lz4hc
	local m=$1 zk="" ze="" zs="-noI -noD -noF -noX"
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

# do_mount SYSTEM MODE: mounts on $MNT; returns 1 when not available.
do_mount() {
	local sys=$1 m=$2
	case $sys in
	kernel)    [ -f "$IMG/mkfs-$m.erofs" ] && mount_erofs "$IMG/mkfs-$m.erofs" "$MNT" ;;
	kiln)      [ -f "$IMG/mkfs-$m.erofs" ] && "$KILN" mount "$IMG/mkfs-$m.erofs" "$MNT" ;;
	kiln-own)  [ -f "$IMG/kiln-$m.erofs" ] && "$KILN" mount "$IMG/kiln-$m.erofs" "$MNT" ;;
	erofsfuse) have erofsfuse && [ -f "$IMG/mkfs-$m.erofs" ] &&
			erofsfuse "$IMG/mkfs-$m.erofs" "$MNT" >/dev/null 2>&1 ;;
	squashfuse_ll) have squashfuse_ll && [ -f "$IMG/$m.sqfs" ] &&
			squashfuse_ll "$IMG/$m.sqfs" "$MNT" ;;
	*) return 1 ;;
	esac || return 1
	wait_mounted "$MNT"
}

do_umount() {
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
	local sys=$1 m=$2 w=$3 v
	do_mount "$sys" "$m" || { echo nan; return 1; }
	drop_caches
	case $w in
	tar)   v=$(time_cmd sh -c "cd '$MNT' && tar -cf - . | cat > /dev/null") ;;
	seq)   v=$(fio_run "seq-$sys-$m" "$MNT/big.bin" --ioengine=psync --runtime=$RUNTIME --rw=read --bs=128k --numjobs=1 | awk '{print $2}') ;;
	rand1) v=$(fio_run "rand1-$sys-$m" "$MNT/big.bin" --ioengine=psync --runtime=$RUNTIME --rw=randread --bs=4k --numjobs=1 --time_based --norandommap --randrepeat=1 | awk '{print $1}') ;;
	rand4) v=$(fio_run "rand4-$sys-$m" "$MNT/big.bin" --ioengine=psync --runtime=$RUNTIME --rw=randread --bs=4k --numjobs=4 --time_based --norandommap --randrepeat=1 | awk '{print $1}') ;;
	esac
	do_umount
	echo "$v"
}

best() { # SYSTEM MODE WORKLOAD: the best of $REPEAT measurements
	local b="" v
	for _ in $(seq "$REPEAT"); do
		v=$(measure "$@")
		b=$(awk -v a="$v" -v b="$b" -v low="$([ "$3" = tar ] && echo 1 || echo 0)" \
			'BEGIN { if (b == "" || (low ? a + 0 < b + 0 : a + 0 > b + 0)) print a; else print b }')
	done
	echo "$b"
}

SYSTEMS="kernel kiln kiln-own erofsfuse squashfuse_ll"
declare -A R

run_mode() { # $1 = plain | lz4hc
	local m=$1 sys w
	echo "== $m: building images"
	build_images "$m"
	for sys in $SYSTEMS; do
		if ! do_mount "$sys" "$m"; then
			echo "-- $sys: not available (missing tool or image)"
			continue
		fi
		do_umount
		echo "-- $sys ($m)"
		for w in tar seq rand1 rand4; do
			R[$m,$sys,$w]=$(best "$sys" "$m" $w)
		done
	done
}

# -- report -------------------------------------------------------------------
# Ratios are against the kernel: for tar, kernel time / time (higher is
# better everywhere).
print_mode() {
	local m=$1 sys k
	echo
	echo "== $m: ${BIG_MIB} MiB file, $SMALL_FILES small files, fio ${RUNTIME}s max, cold cache, best of $REPEAT"
	printf "%-14s %10s %6s %10s %6s %11s %6s %11s %6s\n" system "tar s" "x" "seq MiB/s" "x" "rand1 IOPS" "x" "rand4 IOPS" "x"
	for sys in $SYSTEMS; do
		[ -n "${R[$m,$sys,tar]:-}" ] || continue
		printf "%-14s %10s %6s %10s %6s %11s %6s %11s %6s\n" "$sys" \
			"${R[$m,$sys,tar]}" "$(ratio "${R[$m,kernel,tar]:-0}" "${R[$m,$sys,tar]}")" \
			"${R[$m,$sys,seq]}" "$(ratio "${R[$m,$sys,seq]}" "${R[$m,kernel,seq]:-0}")" \
			"${R[$m,$sys,rand1]}" "$(ratio "${R[$m,$sys,rand1]}" "${R[$m,kernel,rand1]:-0}")" \
			"${R[$m,$sys,rand4]}" "$(ratio "${R[$m,$sys,rand4]}" "${R[$m,kernel,rand4]:-0}")"
	done
}

trap 'mountpoint -q "$MNT" && do_umount' EXIT
MODES="plain lz4hc"
[ -n "$ONLY" ] && MODES=$ONLY
for m in $MODES; do run_mode "$m"; done
for m in $MODES; do print_mode "$m"; done
echo
echo "x: ratio to the kernel's EROFS mount (higher is better; for tar, kernel time / time)."
echo "kiln and erofsfuse serve mkfs.erofs's image; kiln-own serves kiln build's image."
