#!/usr/bin/env bash
# fsyncs.sh counts the fsync-family system calls (fsync, fdatasync, sync_file_range, msync)
# per operation of each write benchmark of this package, with strace: every benchmark runs
# twice, with N and 2N operations, and the difference is divided by N, so that opening and
# filling the store cancel out. Needs strace (Debian: apt-get install strace).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the toolchain every go.mod asks for
cd "$(dirname "$0")"
n=${N:-500}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/storagecmp.test" .
count() { # benchmark pattern, operations
	strace -f -qq -c -e trace=fsync,fdatasync,sync_file_range,msync -o "$tmp/strace" \
		"$tmp/storagecmp.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2x" >/dev/null
	awk '$NF == "total" { print $4 }' "$tmp/strace"
}
printf '%-45s %s\n' benchmark fsyncs/op
for b in 'PutReceipt$/store=wal$' 'PutReceipt$/store=bbolt$' 'Issue$/store=wal$' 'Issue$/store=bbolt$' \
	'PutReceipt8Writers$/store=wal$' 'PutReceipt8Writers$/store=bbolt$' 'PutReceipt8Writers$/store=bbolt-batch$' \
	'WorkflowCreate$/records=1000$/store=wal$' 'WorkflowCreate$/records=1000$/store=bbolt$'; do
	one=$(count "^Benchmark$b" "$n")
	two=$(count "^Benchmark$b" "$((2 * n))")
	printf '%-45s %s\n' "$b" "$(awk -v a="$one" -v b="$two" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')"
done
