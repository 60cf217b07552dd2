#!/usr/bin/env bash
# Read benchmarks of compressed images, side by side in one run:
#  1. the EROFS seed's six fio workloads on kernel mounts (cache_strategy=
#     disabled) of kiln's and mkfs.erofs's images, and the same workloads
#     through kiln's library reader (bench/readbench);
#  2. zero-copy decoding against the forced decode-to-scratch-then-copy path;
#  3. the f2fs seed's dd test: a 1000 MB file read with 512 KiB reads from a
#     cold cache, compressed and uncompressed, kernel mount and kiln's reader.
# Usage: bench/read.sh [--quick] [--no-dd | --dd-only]   (root needed for mounts)
set -u
. "$(dirname "$0")/lib.sh"

QUICK=0
DD=1
DD_ONLY=0
for a in "$@"; do
	case $a in
	--quick) QUICK=1 ;;
	--no-dd) DD=0 ;;
	--dd-only) DD_ONLY=1 ;;
	*) echo "usage: $0 [--quick] [--no-dd | --dd-only]" >&2; exit 2 ;;
	esac
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

declare -A R
workloads() { # $1 = label, $2 = directory holding the files
	local d=$2
	drop_caches; R[$1,seq_shifted_1j]=$(fio_run seq_shifted_1j "$d/shifted_mixed.bin" --rw=read --bs=4k --ioengine=psync --numjobs=1 --offset=0 --size=28m)
	drop_caches; R[$1,rand4k_shifted_1j]=$(fio_run rand4k_shifted_1j "$d/shifted_mixed.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=1 --offset=0 --size=28m --io_size=28m --norandommap=1 --randrepeat=1)
	drop_caches; R[$1,rand4k_shifted_4j]=$(fio_run rand4k_shifted_4j "$d/shifted_mixed.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=4 --offset=0 --size=28m --io_size=28m --norandommap=1 --randrepeat=1)
	drop_caches; R[$1,rand4k_48bit_1j]=$(fio_run rand4k_48bit_1j "$d/large_48bit.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=1 --io_size=$IO1 --norandommap=1 --randrepeat=1)
	drop_caches; R[$1,rand4k_48bit_4j]=$(fio_run rand4k_48bit_4j "$d/large_48bit.bin" --rw=randread --bs=4k --ioengine=psync --numjobs=4 --io_size=$IO4 --norandommap=1 --randrepeat=1)
	drop_caches; R[$1,seq_48bit_cold]=$(fio_run seq_48bit_cold "$d/large_48bit.bin" --rw=read --bs=128k --ioengine=psync --numjobs=1 $SEQ48)
}

lib_workloads() { # $1 = label, $2 = image, $3.. = readbench flags
	local l=$1 img=$2
	shift 2
	rb() { drop_caches; "$READBENCH" "$@" | sed -n 's/.*MiB\/s=\([0-9.]*\) IOPS=\([0-9]*\).*/\2 \1/p'; }
	R[$l,seq_shifted_1j]=$(rb "$@" --bs 4k --size 28m "$img" /shifted_mixed.bin)
	R[$l,rand4k_shifted_1j]=$(rb "$@" --rand --bs 4k --size 28m --io-size 28m "$img" /shifted_mixed.bin)
	R[$l,rand4k_shifted_4j]=$(rb "$@" --rand --jobs 4 --bs 4k --size 28m --io-size 28m "$img" /shifted_mixed.bin)
	R[$l,rand4k_48bit_1j]=$(rb "$@" --rand --bs 4k --io-size $IO1 "$img" /large_48bit.bin)
	R[$l,rand4k_48bit_4j]=$(rb "$@" --rand --jobs 4 --bs 4k --io-size $IO4 "$img" /large_48bit.bin)
	R[$l,seq_48bit_cold]=$(rb "$@" --bs 128k ${SEQ48:+--size 64m} "$img" /large_48bit.bin)
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
	echo "# fio seed workloads: IOPS (MiB/s); peer image: ${PEER_NOTE:-none}"
	printf '%-22s' workload; for l in "${LABELS[@]}"; do printf ' %26s' "$l"; done; echo
	for w in "${W[@]}"; do
		printf '%-22s' "$w"
		for l in "${LABELS[@]}"; do
			# "MEDIAN (MIN-MAX)": two words on purpose
			# shellcheck disable=SC2086
			set -- ${R[$l,$w]:-nan nan}
			printf ' %26s' "$1 ($2)"
		done
		echo
	done
} | tee "$OUT/read-fio.txt"

echo "== zero copy vs forced copy (warm cache, library reader, no cache)"
{
	printf '%-28s %12s %12s %6s\n' workload zero-copy forced-copy ratio
	for spec in "seq128k|--bs 128k|/large_48bit.bin" "seq4k|--bs 4k|/large_48bit.bin" "rand4k|--rand --bs 4k --io-size $IO1|/large_48bit.bin"; do
		IFS='|' read -r name flags path <<< "$spec"
		read -ra flags <<< "$flags"
		"$READBENCH" "${flags[@]}" --cache-none "$OUT/kiln-seed.erofs" "$path" >/dev/null # warm
		z=$("$READBENCH" "${flags[@]}" --cache-none "$OUT/kiln-seed.erofs" "$path" | sed -n 's/.*MiB\/s=\([0-9.]*\).*/\1/p')
		c=$("$READBENCH" "${flags[@]}" --cache-none --force-copy "$OUT/kiln-seed.erofs" "$path" | sed -n 's/.*MiB\/s=\([0-9.]*\).*/\1/p')
		printf '%-28s %10s/s %10s/s %6s\n' "$name MiB" "$z" "$c" "$(ratio "$z" "$c")"
	done
} | tee "$OUT/read-zerocopy.txt"

fi # DD_ONLY

if [ $DD = 1 ]; then
	echo "== dd test: 1000 MB file, 512 KiB reads, cold cache"
	DDS=$OUT/ddtree
	rm -rf "$DDS"; mkdir -p "$DDS"; ln "$SEED/big.bin" "$DDS/"
	"$KILN" build -q -z lz4 "$DDS" "$OUT/dd-lz4.erofs"
	"$KILN" build -q -z zstd:3 --layout extents "$DDS" "$OUT/dd-zstd.erofs"
	"$KILN" build -q "$DDS" "$OUT/dd-none.erofs"
	{
		printf '%-14s %14s %14s\n' image kernel-MB/s libkiln-MB/s
		for img in dd-none dd-lz4 dd-zstd; do
			umount_quiet "$MNT"
			mount_erofs "$OUT/$img.erofs" "$MNT" || continue
			drop_caches
			k=$(dd if="$MNT/big.bin" of=/dev/null bs=512k 2>&1 | awk '/copied/ { print $(NF-1) " " $NF }')
			umount_quiet "$MNT"
			drop_caches
			l=$("$READBENCH" --bs 512k "$OUT/$img.erofs" /big.bin | sed -n 's/.*MiB\/s=\([0-9.]*\).*/\1 MiB\/s/p')
			printf '%-14s %14s %14s\n' "$img" "$k" "$l"
		done
	} | tee "$OUT/read-dd.txt"
fi
