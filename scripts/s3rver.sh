#!/bin/sh
# s3rver (npm), an S3 implementation the e2e tests run as a protocol
# double, installed into a cache directory outside the tree. Prints the
# path of its entry point.
set -eu
dir=${KILN_PEERS:-$HOME/.cache/kiln-peers}/s3rver
bin=$dir/node_modules/s3rver/bin/s3rver.js
if [ ! -f "$bin" ]; then
	mkdir -p "$dir"
	(cd "$dir" && npm install --no-audit --no-fund --silent s3rver@3.7.1 >&2)
fi
echo "$bin"
