#!/bin/sh
# The migration example, start to end (make migration-demo runs it after
# building bin/lhengine and the example's plugins):
#
#   plugins/examples/migration/demo.sh BIN
#
# BIN is the lhengine binary. In a temporary folder it creates a git
# repository from testdata/repo (fixed author and dates, so its commits have
# the same ids on every machine), copies task.hcl and the plugins beside it,
# and uses a home of its own. Then:
#
#   1. lhengine run: plan, rename and check run; deploy-config asks for an
#      approval and the run returns with exit code 3;
#   2. a colleague's commit lands on the repository's HEAD while it waits;
#   3. lhengine approve (the approval's id read from lhengine approvals -o json);
#   4. lhengine resume: before the approved unit runs the engine reads HEAD
#      again, records the drift and, as the task declares
#      (on_drift = "restart:rename"), goes back to rename: the files are
#      converted again from the new HEAD and checked, and the deploy change,
#      now in a new pass, is asked again (exit code 3 once more);
#   5. lhengine approve, lhengine resume: the task succeeds, and the evidence
#      artifact is printed.
#
# Any other outcome stops the script with a non-zero status.
set -eu

[ $# = 1 ] || { echo "usage: $0 LHENGINE" >&2; exit 2; }
lh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work=$tmp/migration
repo=$work/repo
home=$tmp/home

fail() { echo "migration-demo: $*" >&2; exit 1; }
lhengine() { "$lh" --home "$home" "$@"; }
# git as someone, at a fixed time, with no configuration of this machine.
commit_as() {
	who=$1 at=$2
	shift 2
	HOME=$tmp GIT_CONFIG_NOSYSTEM=1 \
		GIT_AUTHOR_NAME=$who GIT_AUTHOR_EMAIL=$who@example.org GIT_AUTHOR_DATE=$at \
		GIT_COMMITTER_NAME=$who GIT_COMMITTER_EMAIL=$who@example.org GIT_COMMITTER_DATE=$at \
		git -C "$repo" -c init.defaultBranch=main -c commit.gpgsign=false "$@"
}
# pending prints the id of the one pending approval (and fails unless
# exactly one is pending).
pending() {
	lhengine approvals -o json >"$tmp/approvals.json"
	n=$(grep -c '^    "state": "pending"' "$tmp/approvals.json" || true)
	[ "$n" = 1 ] || fail "expected one pending approval, found $n: $(cat "$tmp/approvals.json")"
	sed -n 's/^    "id": "\([^"]*\)",$/\1/p' "$tmp/approvals.json"
}
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

mkdir -p "$work"
for p in plan rename check deploy evidence; do
	[ -f "$here/$p.wasm" ] || fail "$here/$p.wasm is missing: build it with GOOS=wasip1 GOARCH=wasm go build (make migration-demo does)"
	cp "$here/$p.wasm" "$work/"
done
cp "$here/task.hcl" "$work/"
cp -R "$here/testdata/repo" "$repo"
commit_as ana 2026-01-05T09:00:00Z init -q
commit_as ana 2026-01-05T09:00:00Z add -A
commit_as ana 2026-01-05T09:00:00Z commit -q -m "shop: every service on OldClient"
before=$(git -C "$repo" rev-parse HEAD)
echo "== a repository at $before, files using OldClient:"
git -C "$repo" grep -c OldClient -- '*.go' | sed 's/^/   /'

echo "== lhengine run task.hcl: deploy-config asks a person, the run returns (exit code 3)"
expect 3 run "$work/task.hcl"
id=$(sed -n '1s/^task //p' "$tmp/out")
[ -n "$id" ] || fail "no task id in the run's output"
approval=$(pending)

echo "== while it waits, a colleague's commit lands: billing/invoice.go gets one more OldClient call"
cp "$here/testdata/colleague/billing/invoice.go" "$repo/billing/invoice.go"
commit_as bo 2026-01-05T11:30:00Z commit -q -am "billing: credit notes"
after=$(git -C "$repo" rev-parse HEAD)
echo "   HEAD is now $after"

echo "== lhengine approve $id $approval, from another command"
expect 0 approve "$id" "$approval" --note "client 2.0.0 is live in staging"

echo "== lhengine resume $id: HEAD moved, so on_drift restart:rename"
expect 3 resume "$id"
lhengine events "$id" >"$tmp/events"
grep -q "drift .*environment fact head changed from $before to $after (on_drift restart:rename)" "$tmp/events" ||
	fail "no drift of fact head from $before to $after in the events:
$(cat "$tmp/events")"
echo "   the events from the drift on:"
sed -n '/ drift /,$p' "$tmp/events"
approval2=$(pending)
[ "$approval2" != "$approval" ] || fail "the deploy change was not asked again"

echo "== lhengine approve $id $approval2, then resume: the task finishes"
expect 0 approve "$id" "$approval2" --note "re-checked at $after"
expect 0 resume "$id"

echo "== the evidence artifact"
ref=$(lhengine outputs -o json "$id" evidence | sed -n 's/^ *"evidence": "\(sha256:[0-9a-f]*\)",\{0,1\}$/\1/p' | head -1)
[ -n "$ref" ] || fail "no evidence ref in the outputs of step evidence"
lhengine artifact get "$ref" >"$tmp/evidence.json"
cat "$tmp/evidence.json"
grep -q '"checks_passed": true' "$tmp/evidence.json" || fail "the evidence does not say the checks passed"
grep -q "\"head_before\": \"$before\"" "$tmp/evidence.json" || fail "the evidence's head_before is not $before"
grep -q "\"head_after\": \"$after\"" "$tmp/evidence.json" || fail "the evidence's head_after is not $after"
grep -q "\"note\": \"re-checked at $after\"" "$tmp/evidence.json" || fail "the evidence does not hold the second approval's note"
echo "== ok: the approval waited, the world moved, the task redid what had gone stale and asked again"
