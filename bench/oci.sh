#!/usr/bin/env bash
# OCI image conversion: a multi-layer image made here with umoci from this
# machine's trees (default /usr/lib/gcc, /usr/share/doc, /usr/share/locale,
# one layer each, then a layer deleting and rewriting part of them),
# converted by
#   kiln build --oci (flattened; uncompressed, and -z zstd, and -z zstd
#       with --memory-limit 64M), kiln build --oci --oci-layer N for each
#       layer, kiln build --tar-index on the first layer uncompressed;
#   mkfs.erofs --tar=f --aufs --ungzip for each layer blob, mkfs.erofs
#       --tar=i on the first layer uncompressed (erofs-utils from PATH:
#       PATH=$(scripts/erofs-utils.sh):$PATH for 1.9);
#   per layer, compressed: kiln -z zstd --oci-layer N, mkfs.erofs -zzstd
#       --tar=f --aufs --ungzip, and gunzip | tar2sqfs -c zstd (Debian's
#       squashfs-tools-ng, when installed);
#   umoci unpack (timed on its own), then mksquashfs of the unpacked tree
#       (uncompressed and -comp zstd).
# Each row: wall seconds and peak RSS (GNU time -v: of the largest process
# for a row of several runs) and image bytes (summed over the layers for
# the per-layer rows), one run each (--runs N: the median of N). Threads:
# kiln -j $THREADS, mkfs.erofs --workers=$THREADS, mksquashfs -processors
# $THREADS. Results: bench/out/oci-<time>.txt.
# Usage: bench/oci.sh [--runs N] [--quick] [--layer DIR]...
set -u
. "$(dirname "$0")/lib.sh"

RUNS=1
THREADS=${THREADS:-2}
LAYERS=()
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--quick) LAYERS=(/usr/share/doc /usr/share/man) ;;
	--layer) LAYERS+=("$2"); shift ;;
	*) echo "usage: $0 [--runs N] [--quick] [--layer DIR]..." >&2; exit 2 ;;
	esac
	shift
done
[ ${#LAYERS[@]} -gt 0 ] || LAYERS=(/usr/lib/gcc /usr/share/doc /usr/share/locale)
[ -x "$KILN" ] || { echo "$0: no kiln at $KILN (set KILN=)" >&2; exit 1; }
for tool in umoci mkfs.erofs mksquashfs /usr/bin/time; do
	have "$tool" || { echo "$0: needs $tool (scripts/install-deps.sh)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (umoci repack of owners)" >&2; exit 1; }

WORK=$OUT/oci-work
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TXT=$OUT/oci-$STAMP.txt
LAY=$WORK/layout
REF=bench

# 1. the image: one layer per tree, then one that deletes and rewrites
echo "making the image (umoci, ${#LAYERS[@]} + 1 layers) ..." >&2
umoci init --layout "$LAY" && umoci new --image "$LAY:$REF" &&
	umoci unpack --image "$LAY:$REF" "$WORK/bundle" >/dev/null || exit 1
R=$WORK/bundle/rootfs
for d in "${LAYERS[@]}"; do
	mkdir -p "$R$(dirname "$d")"
	cp -a "$d" "$R$d"
	umoci repack --refresh-bundle --image "$LAY:$REF" "$WORK/bundle" || exit 1
done
n=0
for d in "${LAYERS[@]}"; do
	# every other entry of each tree goes; the first survivor is rewritten
	find "$R$d" -mindepth 1 -maxdepth 1 | sort | awk 'NR % 2' |
		xargs -r rm -rf
	f=$(find "$R$d" -type f | sort | head -1)
	[ -n "$f" ] && echo "rewritten $n" > "$f"
	n=$((n + 1))
done
umoci repack --refresh-bundle --image "$LAY:$REF" "$WORK/bundle" || exit 1
rm -rf "$WORK/bundle"

# the layer blobs, in manifest order
mapfile -t BLOBS < <(/usr/bin/python3 - "$LAY" "$REF" <<'PY'
import json, sys
lay, ref = sys.argv[1:]
index = json.load(open(f"{lay}/index.json"))
d = next(m for m in index["manifests"]
         if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref)
man = json.load(open(f"{lay}/blobs/sha256/{d['digest'][7:]}"))
for layer in man["layers"]:
    print(f"{lay}/blobs/sha256/{layer['digest'][7:]}")
PY
)
NL=${#BLOBS[@]}
gz_bytes=$(cat "${BLOBS[@]}" | wc -c)
gunzip -c "${BLOBS[0]}" > "$WORK/layer1.tar"
tar_bytes=0
for b in "${BLOBS[@]}"; do
	tar_bytes=$((tar_bytes + $(gunzip -c "$b" | wc -c)))
done

# run_timed OUT CMD...: "SECONDS RSS_KIB" of CMD (GNU time -v), or nan
run_timed() {
	local out=$1
	shift
	rm -f "$out"
	if ! /usr/bin/time -v -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err"; then
		echo "FAILED: $*" >&2
		tail -3 "$WORK/err" >&2
		echo "nan nan"
		return 1
	fi
	awk -F': ' '
	/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0
		for (i = 1; i <= n; i++) s = s * 60 + t[i] }
	/Maximum resident set size/ { r = $2 }
	END { printf "%.2f %d\n", s, r }' "$WORK/time"
}

# row NAME SIZE_FILES -- CMD...: $RUNS runs, median seconds, max RSS
ROWS=()
row() {
	local name=$1 sizes=$2 secs=() rss=0 r s k bytes=0 f
	shift 3
	for _ in $(seq "$RUNS"); do
		r=$("$@") || true
		s=${r% *}
		k=${r#* }
		secs+=("$s")
		[ "$k" != nan ] && [ "$k" -gt "$rss" ] && rss=$k
	done
	for f in $sizes; do
		[ -f "$f" ] && bytes=$((bytes + $(stat -c %s "$f")))
	done
	s=$(printf '%s\n' "${secs[@]}" | stats | cut -d' ' -f1)
	ROWS+=("$(printf '%-44s %8s %9s %12s' "$name" "$s" \
		"$((rss / 1024))" "$bytes")")
	echo "${ROWS[-1]}" >&2
}

# per-layer runs: one timed command running N builds in turn
per_layer() {
	local kind=$1 i worst=0 total=0 r
	for i in $(seq "$NL"); do
		# tar2sqfs's inner shell expands its own arguments
		# shellcheck disable=SC2016
		case $kind in
		kiln) r=$(run_timed "$WORK/l$i.erofs" "$KILN" build -q -j "$THREADS" \
			--oci "$LAY:$REF" --oci-layer "$i" "$WORK/l$i.erofs") ;;
		kiln-zstd) r=$(run_timed "$WORK/lz$i.erofs" "$KILN" build -q \
			-j "$THREADS" -z zstd --oci "$LAY:$REF" --oci-layer "$i" \
			"$WORK/lz$i.erofs") ;;
		mkfs) r=$(run_timed "$WORK/m$i.erofs" mkfs.erofs --quiet \
			--workers="$THREADS" --tar=f --aufs --ungzip \
			"$WORK/m$i.erofs" "${BLOBS[$((i - 1))]}") ;;
		mkfs-zstd) r=$(run_timed "$WORK/mz$i.erofs" mkfs.erofs --quiet \
			--workers="$THREADS" -zzstd --tar=f --aufs --ungzip \
			"$WORK/mz$i.erofs" "${BLOBS[$((i - 1))]}") ;;
		tar2sqfs) r=$(run_timed "$WORK/t$i.sqfs" sh -c \
			'gunzip -c "$1" | tar2sqfs -q -f -c zstd -j "$2" "$3"' \
			sh "${BLOBS[$((i - 1))]}" "$THREADS" "$WORK/t$i.sqfs") ;;
		esac || { echo "nan nan"; return 1; }
		total=$(echo "$total + ${r% *}" | bc -l)
		[ "${r#* }" -gt "$worst" ] && worst=${r#* }
	done
	printf '%.2f %d\n' "$total" "$worst"
}

echo "converting ..." >&2
row "kiln --oci (flattened)" "$WORK/f.erofs" -- \
	run_timed "$WORK/f.erofs" "$KILN" build -q -j "$THREADS" --oci "$LAY:$REF" "$WORK/f.erofs"
row "kiln --oci -z zstd" "$WORK/fz.erofs" -- \
	run_timed "$WORK/fz.erofs" "$KILN" build -q -j "$THREADS" -z zstd \
	--oci "$LAY:$REF" "$WORK/fz.erofs"
row "kiln --oci -z zstd --memory-limit 64M" "$WORK/fm.erofs" -- \
	run_timed "$WORK/fm.erofs" "$KILN" build -q -j "$THREADS" -z zstd \
	--memory-limit 64M --oci "$LAY:$REF" "$WORK/fm.erofs"
row "kiln --oci-layer 1..$NL" "$(for i in $(seq "$NL"); do echo "$WORK/l$i.erofs"; done)" -- \
	per_layer kiln
row "mkfs.erofs --tar=f --aufs --ungzip x$NL" "$(for i in $(seq "$NL"); do echo "$WORK/m$i.erofs"; done)" -- \
	per_layer mkfs
row "kiln -z zstd --oci-layer 1..$NL" "$(for i in $(seq "$NL"); do echo "$WORK/lz$i.erofs"; done)" -- \
	per_layer kiln-zstd
row "mkfs.erofs -zzstd --tar=f --aufs --ungzip x$NL" "$(for i in $(seq "$NL"); do echo "$WORK/mz$i.erofs"; done)" -- \
	per_layer mkfs-zstd
if have tar2sqfs; then
	row "gunzip | tar2sqfs -c zstd x$NL" "$(for i in $(seq "$NL"); do echo "$WORK/t$i.sqfs"; done)" -- \
		per_layer tar2sqfs
fi
row "kiln --tar-index (layer 1, plain tar)" "$WORK/ti.erofs" -- \
	run_timed "$WORK/ti.erofs" "$KILN" build -q --tar-index "$WORK/layer1.tar" "$WORK/ti.erofs"
row "mkfs.erofs --tar=i (layer 1, plain tar)" "$WORK/mi.erofs" -- \
	run_timed "$WORK/mi.erofs" mkfs.erofs --quiet --tar=i "$WORK/mi.erofs" "$WORK/layer1.tar"
# umoci refuses a bundle that is there already: every run starts afresh
unpack_fresh() {
	rm -rf "$WORK/unpacked"
	run_timed "$WORK/unpacked.stamp" umoci unpack --image "$LAY:$REF" "$WORK/unpacked"
}
row "umoci unpack (the tree, for mksquashfs)" "" -- unpack_fresh
row "mksquashfs of it (uncompressed)" "$WORK/sq.img" -- \
	run_timed "$WORK/sq.img" mksquashfs "$WORK/unpacked/rootfs" "$WORK/sq.img" \
	-noappend -processors "$THREADS" -quiet -noI -noD -noF -noX
row "mksquashfs of it -comp zstd" "$WORK/sqz.img" -- \
	run_timed "$WORK/sqz.img" mksquashfs "$WORK/unpacked/rootfs" "$WORK/sqz.img" \
	-noappend -processors "$THREADS" -quiet -comp zstd

# the flattened image must be umoci's tree: a conversion that is wrong is
# no figure
mkdir -p "$WORK/m"
if mount_erofs "$WORK/f.erofs" "$WORK/m"; then
	if diff -r --no-dereference "$WORK/m" "$WORK/unpacked/rootfs" >/dev/null 2>&1; then
		check="flattened image = umoci unpack's rootfs (diff -r)"
	else
		check="FLATTENED IMAGE DIFFERS from umoci unpack's rootfs"
	fi
	umount_quiet "$WORK/m"
else
	check="(flattened image not mounted: no check)"
fi

{
	echo "# OCI image conversion, $(date -u), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# image: ${LAYERS[*]} + a deleting layer: $NL layers, $gz_bytes bytes of gzip blobs, $tar_bytes bytes of tar"
	echo "# threads: kiln -j $THREADS, mkfs.erofs --workers=$THREADS, mksquashfs -processors $THREADS; $(mkfs.erofs --version 2>&1 | head -1)"
	echo "# runs: $RUNS (median seconds, peak RSS of the largest process)"
	echo "# $check"
	printf '%-44s %8s %9s %12s\n' tool seconds rss_MiB image_bytes
	printf '%s\n' "${ROWS[@]}"
} | tee "$TXT"
