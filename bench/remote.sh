#!/usr/bin/env bash
# Reading an image over HTTP: time, bytes fetched and requests sent (one
# round trip each: kiln sends one at a time) for `kiln ls -R`, 50
# random small files, the largest file and a full extract, each from a cold
# cache, against downloading the whole image with curl. nginx and kiln run
# in a network namespace of their own whose loopback gets `tc netem` (the
# machine's own network is untouched); each shaping is one row block.
# Usage: bench/remote.sh IMAGE [NETEM...]   (root; default shapings:
#        "none" and "delay 10ms rate 100mbit", i.e. 20 ms RTT)
# Results: bench/out/remote.txt
set -u
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || { echo "usage: $0 IMAGE [NETEM...]" >&2; exit 2; }
IMAGE=$(realpath "$1")
shift
[ $# -gt 0 ] || set -- none "delay 10ms rate 100mbit"
have nginx || { echo "$0: nginx is missing" >&2; exit 1; }
NS=kiln-bench-$$
WORK=$(mktemp -d)
PORT=18080
RES=$OUT/remote.txt

cleanup() {
	[ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS" || exit 1
ns() { ip netns exec "$NS" "$@"; }
ns ip link set lo up
mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/x"
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

# requests sent (without parallel requests, each is one round trip)
requests() {
	"$KILN" cache --cache-dir "$WORK/c" stat | awk -F': *' '/^requests/ { print $2 }'
}

# run NAME ARGS... (URL is the operand to swap): the local file, then HTTP
run() {
	local what=$1 t l a
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
	printf '%-28s %8s s %8s s %14s bytes %6s requests\n' "$what" "$l" "$t" \
		"$(fetched)" "$(requests)" | tee -a "$RES"
}

: > "$RES"
for shape in "$@"; do
	ns tc qdisc del dev lo root 2>/dev/null
	# $shape is tc's own words: split on purpose
	# shellcheck disable=SC2086
	if [ "$shape" != none ] && ! ns tc qdisc add dev lo root netem $shape; then
		echo "== netem: $shape: not available here (sch_netem), skipped" | tee -a "$RES"
		continue
	fi
	echo "== $(basename "$IMAGE") ($(stat -c %s "$IMAGE") bytes), netem: $shape" | tee -a "$RES"
	printf '%-28s %10s %10s %20s %15s\n' "" "local" "http" "fetched" "requests" | tee -a "$RES"
	O=(--cache-dir "$WORK/c")
	run "kiln ls -R" "$KILN" ls -R "${O[@]}" "$URL"
	# shellcheck disable=SC2086 # the names, one word each
	[ -n "$small" ] &&
		run "kiln cat (50 small files)" "$KILN" cat "${O[@]}" "$URL" $small
	run "kiln cat (largest file)" "$KILN" cat "${O[@]}" "$URL" "$large"
	run "kiln extract (all)" "$KILN" extract "${O[@]}" "$URL" "$WORK/x"
	t=$(time_cmd ns curl -sf -o /dev/null "$URL")
	printf '%-28s %10s %8s s %14s bytes\n' "curl (whole image)" "" "$t" "$(stat -c %s "$IMAGE")" | tee -a "$RES"
done
