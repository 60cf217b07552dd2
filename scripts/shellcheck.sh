#!/bin/sh
# Run shellcheck on every shell script of the tree: *.sh, .ci/run, and any
# tracked file whose first line names sh or bash. Exits non-zero on any
# finding (.shellcheckrc holds the settings).
set -eu
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null ||
	{ echo "$0: shellcheck is missing (scripts/install-deps.sh)" >&2; exit 2; }
# shellcheck disable=SC2016 # an awk program: awk expands its $0
git ls-files -z | xargs -0 awk 'FNR == 1 {
	if (FILENAME ~ /\.sh$/ || FILENAME == ".ci/run" ||
	    $0 ~ /^#!.*\/(env )?(ba)?sh( |$)/) print FILENAME
	nextfile }' | sort -u | xargs shellcheck
