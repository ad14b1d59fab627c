#!/bin/sh
# The site-audit example, start to end (make audit-demo runs it after
# building bin/lhengine, bin/auditsite and the example's plugins):
#
#   PAGES=300 plugins/examples/site-audit/demo.sh BIN SITE
#
# BIN is the lhengine binary, SITE the site generator (./site). In a
# temporary folder with a home of its own:
#
#   1. the site starts on a free loopback port with PAGES pages (default 300)
#      and its planted problems;
#   2. lhengine run: the sitemap is read and every page checked (the status
#      line is printed every 5 seconds meanwhile); suggest asks for an
#      approval ("Generate title rewrites for N pages?") and the run returns
#      with exit code 3;
#   3. lhengine approve (the approval's id read from lhengine approvals -o json),
#      from another command;
#   4. lhengine resume: the titles are suggested and the report written;
#   5. the status, the Markdown report, and the comparison of the report's
#      numbers with the site's /planted.json, which must be equal; the site
#      must have received no request but GET and HEAD.
#
# Any other outcome stops the script with a non-zero status.
set -eu

[ $# = 2 ] || { echo "usage: [PAGES=N] $0 LHENGINE SITE" >&2; exit 2; }
lh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
site=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
here=$(cd "$(dirname "$0")" && pwd)
pages=${PAGES:-300}
tmp=$(mktemp -d)
sitepid=
run=
trap '[ -z "$run" ] || kill "$run" 2>/dev/null; [ -z "$sitepid" ] || kill "$sitepid" 2>/dev/null; rm -rf "$tmp"' EXIT
work=$tmp/site-audit
home=$tmp/home

fail() { echo "audit-demo: $*" >&2; exit 1; }
lhengine() { "$lh" --home "$home" "$@"; }
# expect CODE CMD...: runs lhengine CMD, printing its output, and fails
# unless it exits with CODE.
expect() {
	want=$1
	shift
	code=0
	lhengine "$@" >"$tmp/out" 2>"$tmp/err" || code=$?
	cat "$tmp/out"
	[ "$code" = "$want" ] || fail "lhengine $* exited with $code, expected $want:
$(cat "$tmp/err")"
}
# get PATH: the site's answer to GET PATH.
get() { curl -sf "http://$addr$1" || fail "GET http://$addr$1 failed"; }
# number KEY FILE: the first "KEY": N in the JSON file.
number() { sed -n "s/^ *\"$1\": \([0-9][0-9]*\),\{0,1\}\$/\1/p" "$2" | head -1; }

mkdir -p "$work"
for p in sitemap check suggest report; do
	[ -f "$here/$p.wasm" ] || fail "$here/$p.wasm is missing: build it with GOOS=wasip1 GOARCH=wasm go build (make audit-demo does)"
	cp "$here/$p.wasm" "$work/"
done
cp "$here/task.hcl" "$work/"

echo "== a site of $pages pages on loopback"
"$site" -pages "$pages" -addr 127.0.0.1:0 -addr-file "$tmp/addr" &
sitepid=$!
i=0
while [ ! -s "$tmp/addr" ]; do
	kill -0 "$sitepid" 2>/dev/null || fail "the site did not start (see above)"
	i=$((i + 1))
	[ $i -le 100 ] || fail "the site did not write its address within 10s"
	sleep 0.1
done
addr=$(cat "$tmp/addr")
get /planted.json >"$tmp/planted.json"
echo "   planted:"
sed 's/^/   /' "$tmp/planted.json"

echo "== lhengine run task.hcl --var site=http://$addr: every page checked, then suggest asks a person (exit code 3)"
start=$(date +%s)
# The run in the background, its status line every 5 seconds meanwhile.
code=0
"$lh" --home "$home" run "$work/task.hcl" --var "site=http://$addr" >"$tmp/out" 2>"$tmp/err" &
run=$!
id=
i=0
while kill -0 "$run" 2>/dev/null; do
	[ -n "$id" ] || id=$(sed -n '1s/^task //p' "$tmp/out")
	if [ -n "$id" ] && [ $((i % 25)) = 24 ]; then
		lhengine status "$id" 2>/dev/null | sed -n '1s/^/   /p' || true
	fi
	i=$((i + 1))
	sleep 0.2
done
wait "$run" || code=$?
run=
cat "$tmp/out"
[ "$code" = 3 ] || fail "lhengine run exited with $code, expected 3:
$(cat "$tmp/err")"
id=$(sed -n '1s/^task //p' "$tmp/out")
[ -n "$id" ] || fail "no task id in the run's output"
lhengine approvals -o json "$id" >"$tmp/approvals.json"
n=$(grep -c '^    "state": "pending"' "$tmp/approvals.json" || true)
[ "$n" = 1 ] || fail "expected one pending approval, found $n: $(cat "$tmp/approvals.json")"
approval=$(sed -n 's/^    "id": "\([^"]*\)",$/\1/p' "$tmp/approvals.json")
grep "\"prompt\"" "$tmp/approvals.json" | sed 's/^ */   /'
lhengine status "$id" | sed -n '1s/^/   /p'

echo "== lhengine approve $id $approval, from another command"
expect 0 approve "$id" "$approval" --note "go ahead"

echo "== lhengine resume $id: the titles are suggested and the report written"
expect 0 resume "$id"
end=$(date +%s)

echo "== lhengine status $id"
lhengine status "$id" | sed -n '1,8p'

lhengine outputs -o json "$id" report >"$tmp/report.out"
md=$(sed -n 's/^ *"markdown": "\(sha256:[0-9a-f]*\)",\{0,1\}$/\1/p' "$tmp/report.out")
js=$(sed -n 's/^ *"json": "\(sha256:[0-9a-f]*\)",\{0,1\}$/\1/p' "$tmp/report.out")
[ -n "$md" ] && [ -n "$js" ] || fail "no report refs in the outputs of step report: $(cat "$tmp/report.out")"
echo "== report.md ($md), its first lines"
lhengine artifact get "$md" >"$tmp/report.md"
sed -n '1,12p' "$tmp/report.md"
lhengine artifact get "$js" >"$tmp/report.json"

echo "== the report's numbers against /planted.json"
bad=0
for k in pages missing_title missing_description duplicate_title broken_links images_without_alt; do
	want=$(number "$k" "$tmp/planted.json")
	got=$(number "$k" "$tmp/report.json")
	if [ -n "$want" ] && [ "$want" = "$got" ]; then
		printf '   %-20s %6s = %s\n' "$k" "$got" "$want"
	else
		printf '   %-20s %6s, planted %s: MISMATCH\n' "$k" "$got" "$want"
		bad=1
	fi
done
[ $bad = 0 ] || fail "the report's numbers differ from the planted ones"
get /stats.json >"$tmp/stats.json"
writes=$(number writes "$tmp/stats.json")
[ "$writes" = 0 ] || fail "the site received $writes requests other than GET and HEAD"
echo "   the site received $(number gets "$tmp/stats.json") GETs ($(number failed_500 "$tmp/stats.json") answered 500 once and retried), $(number heads "$tmp/stats.json") HEADs, no writes"
secs=$((end - start))
[ $secs -gt 0 ] || secs=1
echo "== ok: $pages pages audited in about ${secs}s (run to the approval, then resume), the report equals what was planted"
