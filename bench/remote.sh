#!/usr/bin/env bash
# Reading an image over HTTP: time, bytes fetched and requests sent
# (ranges wanted together go out at once: requests are not all round
# trips) for `kiln ls -R`, 50 random small files, the largest file, a
# full read that writes nothing (`kiln fsck`: every byte fetched and
# decoded), a full extract and a full `tar` of the tree through `kiln
# mount`, each from a cold cache and again warm (the cache it filled),
# against the local image and downloading the whole image with curl;
# then two readers sharing one cold cache. nginx and kiln run in a network namespace of their own
# whose loopback gets the shaping (the machine's own network is
# untouched); each shaping is one row block. A shaping is tc's netem
# words ("delay 10ms rate 100mbit"). Where the kernel has no netem,
# "rate R" alone takes tbf, and "delay Nms [rate R]" a relay
# (bench/delay-relay.py) that holds every chunk N ms each way and paces
# the answers at R: the URL then goes through it, for curl too.
# Usage: bench/remote.sh IMAGE [SHAPING...]   (root; default shapings:
#        "none", "delay 10ms rate 100mbit" (20 ms RTT) and "rate 100mbit")
# Results: bench/out/remote.txt
set -u
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || { echo "usage: $0 IMAGE [NETEM...]" >&2; exit 2; }
IMAGE=$(realpath "$1")
shift
[ $# -gt 0 ] || set -- none "delay 10ms rate 100mbit" "rate 100mbit"
have nginx || { echo "$0: nginx is missing" >&2; exit 1; }
NS=kiln-bench-$$
WORK=$(mktemp -d)
PORT=18080
RES=$OUT/remote.txt

cleanup() {
	[ -n "$RELAY_PID" ] && kill "$RELAY_PID" 2>/dev/null
	[ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS" || exit 1
ns() { ip netns exec "$NS" "$@"; }
ns ip link set lo up
mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/x" "$WORK/m"
ln -s "$IMAGE" "$WORK/www/image.erofs"
cat > "$WORK/nginx.conf" <<CONF
user root;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $WORK/tmp; proxy_temp_path $WORK/tmp;
  fastcgi_temp_path $WORK/tmp; uwsgi_temp_path $WORK/tmp;
  scgi_temp_path $WORK/tmp;
  server { listen 127.0.0.1:$PORT; root $WORK/www; }
}
CONF
ns nginx -p "$WORK" -c "$WORK/nginx.conf" || exit 1
URL=http://127.0.0.1:$PORT/image.erofs

# the 50 small files and the largest, from the local image's listing
# (names without blanks: the output is split on them)
"$KILN" ls -R -l "$IMAGE" / | awk '
	/^\/.*:$/ { dir = substr($0, 1, length($0) - 1); if (dir == "/") dir = ""; next }
	$1 ~ /^-/ && NF == 8 { print $5, dir "/" $8 }' > "$WORK/files"
small=$(awk '$1 < 65536 { print $2 }' "$WORK/files" | shuf -n 50 --random-source=<(yes))
large=$(sort -n "$WORK/files" | tail -1 | cut -d' ' -f2)

fetched() {
	"$KILN" cache --cache-dir "$WORK/c" stat | awk -F': *' '/^bytes fetched/ { print $2 }'
}

# requests sent
requests() {
	"$KILN" cache --cache-dir "$WORK/c" stat | awk -F': *' '/^requests/ { print $2 }'
}

# run NAME ARGS... (URL is the operand to swap): the local file, then HTTP
# from an empty cache, then again from the cache that run filled
run() {
	local what=$1 t w l a f r
	shift
	rm -rf "$WORK/x" && mkdir -p "$WORK/x"
	local=()
	for a in "$@"; do
		case $a in
		"$URL") local+=("$IMAGE") ;;
		--cache-dir|"$WORK/c") ;;
		*) local+=("$a") ;;
		esac
	done
	l=$(time_cmd "${local[@]}")
	rm -rf "$WORK/c" "$WORK/x" && mkdir -p "$WORK/x"
	t=$(time_cmd ns "$@")
	f=$(fetched) r=$(requests)
	rm -rf "$WORK/x" && mkdir -p "$WORK/x"
	w=$(time_cmd ns "$@")
	printf '%-28s %8s s %8s s %8s s %14s bytes %6s requests\n' "$what" \
		"$l" "$t" "$w" "$f" "$r" | tee -a "$RES"
}

# mount_tar SOURCE [OPTION...]: seconds a tar of the whole tree takes
# through `kiln mount` (the mount is made, read and unmounted inside the
# namespace, whose mounts nobody else sees)
mount_tar() {
	# the inner shell expands its own arguments
	# shellcheck disable=SC2016
	ns sh -c 'k=$1 m=$2; shift 2
		"$k" mount -f "$@" "$m" 2>/dev/null & p=$!
		i=0
		until mountpoint -q "$m"; do
			i=$((i + 1)); [ $i -gt 600 ] && exit 1; sleep 0.1
		done
		s=$(date +%s.%N)
		tar -cf - -C "$m" . | wc -c > /dev/null
		e=$(date +%s.%N)
		umount "$m"; wait $p
		echo "$s $e" | awk "{ printf \"%.2f\", \$2 - \$1 }"' \
		sh "$KILN" "$WORK/m" "$@"
}

# bits a second of a tc rate ("100mbit", "1gbit", "500kbit")
to_bits() {
	case $1 in
	*gbit) echo $((${1%gbit} * 1000000000)) ;;
	*mbit) echo $((${1%mbit} * 1000000)) ;;
	*kbit) echo $((${1%kbit} * 1000)) ;;
	*bit) echo "${1%bit}" ;;
	*) return 1 ;;
	esac
}

# stop the relay, and wait until its port is free for the next one
stop_relay() {
	[ -n "$RELAY_PID" ] || return 0
	kill "$RELAY_PID" 2>/dev/null
	wait "$RELAY_PID" 2>/dev/null
	RELAY_PID=
}

# relay WORDS: "delay Nms [rate R]" by bench/delay-relay.py in the
# namespace, for a kernel without sch_netem; URL then goes through it
RELAY_PID=
relay() {
	local d='' r=0
	# $1 is tc's own words: split on purpose
	# shellcheck disable=SC2086
	set -- $1
	while [ $# -ge 2 ]; do
		case $1 in
		delay) d=${2%ms} ;;
		rate) r=$(to_bits "$2") || return 1 ;;
		*) return 1 ;;
		esac
		shift 2
	done
	[ $# = 0 ] && [ -n "$d" ] || return 1
	# not through ns(): $! must be the relay itself, for stop_relay
	ip netns exec "$NS" python3 "$BENCH_ROOT/bench/delay-relay.py" \
		$((PORT + 1)) "$PORT" "$d" "$r" &
	RELAY_PID=$!
	URL=http://127.0.0.1:$((PORT + 1))/image.erofs
	for _ in $(seq 50); do
		ns curl -sf -r 0-0 -o /dev/null "$URL" && return 0
		sleep 0.1
	done
	return 1
}

# shape WORDS: netem; else tbf for "rate R", the relay for a delay
shape() {
	ns tc qdisc del dev lo root 2>/dev/null
	stop_relay
	URL=http://127.0.0.1:$PORT/image.erofs
	VIA=
	[ "$1" = none ] && return 0
	# $1 is tc's own words: split on purpose
	# shellcheck disable=SC2086
	ns tc qdisc add dev lo root netem $1 2>/dev/null && return 0
	case $1 in
	"rate "*)
		VIA=" (tbf: no sch_netem)"
		ns tc qdisc add dev lo root tbf rate "${1#rate }" \
			burst 256kb latency 100ms ;;
	*)
		VIA=" (delay-relay.py: no sch_netem)"
		relay "$1" ;;
	esac
}

: > "$RES"
for shaping in "$@"; do
	if ! shape "$shaping"; then
		echo "== $shaping: cannot be made here, skipped" | tee -a "$RES"
		continue
	fi
	echo "== $(basename "$IMAGE") ($(stat -c %s "$IMAGE") bytes), shaping: $shaping$VIA" | tee -a "$RES"
	printf '%-28s %10s %10s %10s %20s %15s\n' "" "local" "http cold" \
		"http warm" "fetched (cold)" "requests" | tee -a "$RES"
	O=(--cache-dir "$WORK/c")
	run "kiln ls -R" "$KILN" ls -R "${O[@]}" "$URL"
	# shellcheck disable=SC2086 # the names, one word each
	[ -n "$small" ] &&
		run "kiln cat (50 small files)" "$KILN" cat "${O[@]}" "$URL" $small
	run "kiln cat (largest file)" "$KILN" cat "${O[@]}" "$URL" "$large"
	run "kiln fsck (reads all)" "$KILN" fsck "${O[@]}" "$URL"
	run "kiln extract (all)" "$KILN" extract "${O[@]}" "$URL" "$WORK/x"
	# a full tar through the FUSE mount: local image, cold, warm
	l=$(mount_tar "$IMAGE")
	rm -rf "$WORK/c"
	t=$(mount_tar "${O[@]}" "$URL")
	f=$(fetched) r=$(requests)
	w=$(mount_tar "${O[@]}" "$URL")
	printf '%-28s %8s s %8s s %8s s %14s bytes %6s requests\n' \
		"tar of a kiln mount (all)" "$l" "$t" "$w" "$f" "$r" | tee -a "$RES"
	t=$(time_cmd ns curl -sf -o /dev/null "$URL")
	printf '%-28s %10s %8s s %10s %14s bytes\n' "curl (whole image)" "" "$t" "" "$(stat -c %s "$IMAGE")" | tee -a "$RES"
	# two readers at once on one cold cache: each unit fetched once
	rm -rf "$WORK/c"
	# the inner shell expands its own arguments
	# shellcheck disable=SC2016
	t=$(time_cmd ns sh -c '"$1" fsck --cache-dir "$2" "$3" & a=$!
		"$1" fsck --cache-dir "$2" "$3"; b=$?; wait $a && [ $b = 0 ]' \
		sh "$KILN" "$WORK/c" "$URL")
	printf '%-28s %10s %8s s %10s %14s bytes %6s requests\n' \
		"2x kiln fsck, one cache" "" "$t" "" "$(fetched)" \
		"$(requests)" | tee -a "$RES"
done
