#!/usr/bin/env bash
# Run every benchmark of bench/ in turn; each writes its results to
# bench/out/. Arguments (e.g. --quick) are passed to each script.
# A benchmark that fails is reported and the others still run.
set -u
cd "$(dirname "$0")" || exit 1

status=0
for script in build.sh read.sh fuse.sh; do
	[ -x "$script" ] || [ -f "$script" ] || continue
	echo "=== bench/$script $*"
	if ! bash "$script" "$@"; then
		echo "=== bench/$script FAILED" >&2
		status=1
	fi
done
# Benchmarks added later and not listed above.
for script in *.sh; do
	case $script in
	lib.sh|prepare-corpus.sh|run-all.sh|report.sh|build.sh|read.sh|fuse.sh) continue ;;
	esac
	echo "=== bench/$script $*"
	bash "$script" "$@" || { echo "=== bench/$script FAILED" >&2; status=1; }
done
exit $status
