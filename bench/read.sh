#!/usr/bin/env bash
# Read benchmarks of compressed images, side by side in one run:
#  1. the EROFS seed's six fio workloads on kernel mounts (cache_strategy=
#     disabled) of kiln's and mkfs.erofs's images, and the same workloads
#     through kiln's library reader (bench/readbench);
#  2. zero-copy decoding against the forced decode-to-scratch-then-copy path;
#  3. the f2fs seed's dd test: a 1000 MB file read with 512 KiB reads from a
#     cold cache, compressed and uncompressed, kernel mount and kiln's reader.
# Each fio or readbench figure is the median of --runs N (default 3), with
# min and max, every run from dropped caches; fio's --numjobs and readbench's
# --jobs are the threads, named by each workload (_1j, _4j).
# Usage: bench/read.sh [--quick] [--runs N] [--no-dd | --dd-only]   (root needed for mounts)
# Results: bench/out/read-fio.txt, read-zerocopy.txt, read-dd.txt and
# read-<time>.tsv (the fio workloads, for bench/report.sh).
set -u
. "$(dirname "$0")/lib.sh"

QUICK=0
DD=1
DD_ONLY=0
RUNS=3
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--runs) RUNS=$2; shift ;;
	--no-dd) DD=0 ;;
	--dd-only) DD_ONLY=1 ;;
	*) echo "usage: $0 [--quick] [--runs N] [--no-dd | --dd-only]" >&2; exit 2 ;;
	esac
	shift
done

SEED=$OUT/seedfiles
MNT=$OUT/mnt
DD_ARG=""
[ "$DD" = 1 ] && DD_ARG=--dd
[ -f "$SEED/large_48bit.bin" ] || /usr/bin/python3 "$BENCH_ROOT/bench/mkseedfiles.py" "$SEED" ${DD_ARG:+"$DD_ARG"}
[ $DD = 1 ] && [ ! -f "$SEED/big.bin" ] && /usr/bin/python3 "$BENCH_ROOT/bench/mkseedfiles.py" "$SEED" --dd
if [ $DD_ONLY = 0 ]; then
SRC=$OUT/seedtree
rm -rf "$SRC"; mkdir -p "$SRC"
ln "$SEED/shifted_mixed.bin" "$SEED/large_48bit.bin" "$SRC/"

# The seed's image recipe: 48-bit extents, deflate level 1, 32 KiB pclusters.
echo "== building images"
"$KILN" build -q -z deflate:1 -C 32768 --layout extents "$SRC" "$OUT/kiln-seed.erofs" ||
	{ echo "kiln build failed" >&2; exit 1; }
PEER_NOTE="mkfs.erofs -E48bit -zdeflate,level=1 -C32768"
if ! mkfs.erofs -E48bit -zdeflate,level=1 -C32768 "$OUT/mkfs-seed.erofs" "$SRC" >/dev/null 2>&1; then
	# Older mkfs.erofs (Debian 12 ships 1.5: lz4 only, no 48-bit layout).
	PEER_NOTE="mkfs.erofs -zlz4hc -C32768 (this mkfs.erofs lacks -E48bit/deflate)"
	mkfs.erofs -zlz4hc -C32768 "$OUT/mkfs-seed.erofs" "$SRC" >/dev/null 2>&1 || PEER_NOTE=""
	"$KILN" build -q -z lz4hc -C 32768 "$SRC" "$OUT/kiln-seed-lz4hc.erofs"
fi
ls -l "$OUT"/*.erofs

IO1=64m; IO4=32m; SEQ48=
[ $QUICK = 1 ] && { IO1=16m; IO4=8m; SEQ48=--size=64m; }

declare -A R SPAN
TSV=$OUT/read-$(date -u +%Y%m%dT%H%M%SZ).tsv
tsv_open "$TSV"
tsv_row "# title: fio seed workloads, kernel mounts and kiln's library reader"
tsv_row "# threads: the workload's jobs (_1j: 1, _4j: 4; fio --numjobs, readbench --jobs); median (min-max) of $RUNS runs, caches dropped before each"
tsv_row "# x: workload"
tsv_row "# series: system"
tsv_row "# plot: mib_s MiB/s 1 throughput"
tsv_row "# plot: iops IOPS 1 IOPS"
tsv_row table workload system iops iops_min iops_max mib_s mib_s_min mib_s_max

# repeat LABEL WORKLOAD CMD...: RUNS runs of CMD (which prints "IOPS
# MiB/s"), each from dropped caches; R gets the medians, SPAN the ranges.
repeat() {
	local l=$1 w=$2 runs="" im ilo ihi mm mlo mhi
	shift 2
	for _ in $(seq "$RUNS"); do
		drop_caches
		runs+="$("$@")"$'\n'
	done
	read -r im ilo ihi <<< "$(awk '$1 != "nan" && NF { print $1 }' <<< "$runs" | stats)"
	read -r mm mlo mhi <<< "$(awk '$2 != "nan" && NF { print $2 }' <<< "$runs" | stats)"
	R[$l,$w]="$im $mm"
	SPAN[$l,$w]="$ilo-$ihi"
	tsv_row seed "$w" "$l" "$im" "$ilo" "$ihi" "$mm" "$mlo" "$mhi"
}

workloads() { # $1 = label, $2 = directory holding the files
	local l=$1 d=$2
	repeat "$l" seq_shifted_1j fio_run seq_shifted_1j "$d/shifted_mixed.bin" --rw=read --bs=4k --ioengine=psync --numjobs=1 --offset=0 --size=28m
	repeat "$l" rand4k_shifted_1j fio_run rand4k_shifted_1j "$d/shifted_mixed.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=1 --offset=0 --size=28m --io_size=28m --norandommap=1 --randrepeat=1
	repeat "$l" rand4k_shifted_4j fio_run rand4k_shifted_4j "$d/shifted_mixed.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=4 --offset=0 --size=28m --io_size=28m --norandommap=1 --randrepeat=1
	repeat "$l" rand4k_48bit_1j fio_run rand4k_48bit_1j "$d/large_48bit.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=1 --io_size=$IO1 --norandommap=1 --randrepeat=1
	repeat "$l" rand4k_48bit_4j fio_run rand4k_48bit_4j "$d/large_48bit.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=4 --io_size=$IO4 --norandommap=1 --randrepeat=1
	# shellcheck disable=SC2086 # $SEQ48: no word or one option
	repeat "$l" seq_48bit_cold fio_run seq_48bit_cold "$d/large_48bit.bin" --rw=read --bs=128k --ioengine=psync --numjobs=1 $SEQ48
}

# readbench prints "... MiB/s=X IOPS=Y ...": as "IOPS MiB/s"
rb() { "$READBENCH" "$@" | sed -n 's/.*MiB\/s=\([0-9.]*\) IOPS=\([0-9]*\).*/\2 \1/p'; }

mibs() { "$READBENCH" "$@" | sed -n 's/.*MiB\/s=\([0-9.]*\).*/\1/p'; }

# runs_of CMD...: "MEDIAN MIN MAX" of the number CMD prints, RUNS runs
runs_of() {
	for _ in $(seq "$RUNS"); do "$@"; done | awk '$1 != "nan" && NF { print $1 }' | stats
}

lib_workloads() { # $1 = label, $2 = image, $3.. = readbench flags
	local l=$1 img=$2
	shift 2
	repeat "$l" seq_shifted_1j rb "$@" --bs 4k --size 28m "$img" /shifted_mixed.bin
	repeat "$l" rand4k_shifted_1j rb "$@" --rand --bs 4k --size 28m --io-size 28m "$img" /shifted_mixed.bin
	repeat "$l" rand4k_shifted_4j rb "$@" --rand --jobs 4 --bs 4k --size 28m --io-size 28m "$img" /shifted_mixed.bin
	repeat "$l" rand4k_48bit_1j rb "$@" --rand --bs 4k --io-size $IO1 "$img" /large_48bit.bin
	repeat "$l" rand4k_48bit_4j rb "$@" --rand --jobs 4 --bs 4k --io-size $IO4 "$img" /large_48bit.bin
	repeat "$l" seq_48bit_cold rb "$@" --bs 128k ${SEQ48:+--size 64m} "$img" /large_48bit.bin
}

LABELS=()
echo "== kernel mounts (cache_strategy=disabled)"
for img in kiln-seed mkfs-seed kiln-seed-lz4hc; do
	[ -f "$OUT/$img.erofs" ] || continue
	umount_quiet "$MNT"
	mount_erofs "$OUT/$img.erofs" "$MNT" cache_strategy=disabled || continue
	workloads "kernel:$img" "$MNT"
	umount_quiet "$MNT"
	LABELS+=("kernel:$img")
done
echo "== kiln library reader"
for img in kiln-seed mkfs-seed; do
	[ -f "$OUT/$img.erofs" ] || continue
	lib_workloads "libkiln:$img" "$OUT/$img.erofs" --cache-none
	LABELS+=("libkiln:$img")
done

W=(seq_shifted_1j rand4k_shifted_1j rand4k_shifted_4j rand4k_48bit_1j rand4k_48bit_4j seq_48bit_cold)
{
	echo "# fio seed workloads: IOPS [min-max] (MiB/s), median of $RUNS runs; threads: _1j 1, _4j 4; peer image: ${PEER_NOTE:-none}"
	printf '%-22s' workload; for l in "${LABELS[@]}"; do printf ' %36s' "$l"; done; echo
	for w in "${W[@]}"; do
		printf '%-22s' "$w"
		for l in "${LABELS[@]}"; do
			# "IOPS MiB/s": two words on purpose
			# shellcheck disable=SC2086
			set -- ${R[$l,$w]:-nan nan}
			printf ' %36s' "$1 [${SPAN[$l,$w]:-}] ($2)"
		done
		echo
	done
} | tee "$OUT/read-fio.txt"

echo "== zero copy vs forced copy (warm cache, library reader, no cache)"
{
	echo "# MiB/s, median [min-max] of $RUNS runs, one thread"
	printf '%-28s %24s %24s %6s\n' workload zero-copy forced-copy ratio
	for spec in "seq128k|--bs 128k|/large_48bit.bin" "seq4k|--bs 4k|/large_48bit.bin" "rand4k|--rand --bs 4k --io-size $IO1|/large_48bit.bin"; do
		IFS='|' read -r name flags path <<< "$spec"
		read -ra flags <<< "$flags"
		"$READBENCH" "${flags[@]}" --cache-none "$OUT/kiln-seed.erofs" "$path" >/dev/null # warm
		read -r z zlo zhi <<< "$(runs_of mibs "${flags[@]}" --cache-none "$OUT/kiln-seed.erofs" "$path")"
		read -r c clo chi <<< "$(runs_of mibs "${flags[@]}" --cache-none --force-copy "$OUT/kiln-seed.erofs" "$path")"
		printf '%-28s %24s %24s %6s\n' "$name" "$z [$zlo-$zhi]" "$c [$clo-$chi]" "$(ratio "$z" "$c")"
	done
} | tee "$OUT/read-zerocopy.txt"

fi # DD_ONLY

# The dd test's two readers (run through runs_of), from a cold cache.
# shellcheck disable=SC2317
kernel_dd() {
	drop_caches
	dd if="$MNT/big.bin" of=/dev/null bs=512k 2>&1 |
		awk '/copied/ { v = $(NF-1); if ($NF == "GB/s") v *= 1000; print v }'
}
# shellcheck disable=SC2317
lib_dd() { drop_caches; mibs --bs 512k "$OUT/$1.erofs" /big.bin; }

if [ $DD = 1 ]; then
	echo "== dd test: 1000 MB file, 512 KiB reads, cold cache"
	DDS=$OUT/ddtree
	rm -rf "$DDS"; mkdir -p "$DDS"; ln "$SEED/big.bin" "$DDS/"
	"$KILN" build -q -z lz4 "$DDS" "$OUT/dd-lz4.erofs"
	"$KILN" build -q -z zstd:3 --layout extents "$DDS" "$OUT/dd-zstd.erofs"
	"$KILN" build -q "$DDS" "$OUT/dd-none.erofs"
	{
		echo "# MB/s (dd, 10^6) and MiB/s (readbench), median [min-max] of $RUNS cold runs, one thread"
		printf '%-14s %24s %24s\n' image kernel-MB/s libkiln-MiB/s
		for img in dd-none dd-lz4 dd-zstd; do
			umount_quiet "$MNT"
			mount_erofs "$OUT/$img.erofs" "$MNT" || continue
			read -r k klo khi <<< "$(runs_of kernel_dd)"
			umount_quiet "$MNT"
			read -r l llo lhi <<< "$(runs_of lib_dd "$img")"
			printf '%-14s %24s %24s\n' "$img" "$k [$klo-$khi]" "$l [$llo-$lhi]"
		done
	} | tee "$OUT/read-dd.txt"
fi
