#!/usr/bin/env bash
# bisect.sh - find the commit that introduced a numerical regression.
#
#   scripts/bisect.sh GOOD BAD -- <dsv4check arguments>
#   e.g. scripts/bisect.sh v0.1.0 HEAD -- run cases/ci.yaml --filter combine
#
# Drives `git bisect run` in the current repository: at each commit it
# builds build/dsv4check (`make build/dsv4check`) and runs it with the given
# arguments.  Exit codes for git bisect:
#   dsv4check 0 (passed)                 -> 0   good
#   dsv4check 1 (tolerance violation)    -> 1   bad
#   build failure, dsv4check 2/3/77      -> 125 skip (untestable: bad input at
#                                               that commit, a runtime error, no GPU)
# At the end it prints the first bad commit and the failing report that
# dsv4check printed there, and resets the bisect (the checkout returns to
# where it was).  The work tree must be clean.  MAKEFLAGS passes through
# (e.g. MAKEFLAGS=-j4).  Exit: 0 found, 1 not found, 2 usage or git error.
set -uo pipefail

if [ "${1:-}" = "--step" ]; then
    # One bisect step (run by git bisect from a copy of this script, since
    # older commits may not have it).  $2: the report directory.
    shift
    reports=$1
    shift
    commit=$(git rev-parse HEAD)
    # SAN/BUILD pinned: a caller inside `make SAN=1` exports SAN=1 to us.
    if ! make SAN=0 BUILD=build build/dsv4check >"$reports/$commit.build" 2>&1; then
        echo "bisect: $(git log -1 --format='%h %s') does not build: skip (125)"
        exit 125
    fi
    build/dsv4check "$@" >"$reports/$commit.report" 2>&1
    rc=$?
    case $rc in
        0) verdict="good"; code=0 ;;
        1) verdict="bad (tolerance violation)"; code=1 ;;
        *) verdict="untestable (dsv4check exit $rc): skip"; code=125 ;;
    esac
    echo "bisect: $(git log -1 --format='%h %s'): $verdict"
    exit $code
fi

usage() {
    echo "usage: $0 GOOD BAD -- <dsv4check arguments>" >&2
    exit 2
}
[ $# -ge 3 ] || usage
good=$1
bad=$2
[ "$3" = "--" ] || usage
shift 3
[ $# -ge 1 ] || usage

git rev-parse --git-dir >/dev/null 2>&1 || { echo "bisect: not in a git repository" >&2; exit 2; }
good_c=$(git rev-parse --verify -q "$good^{commit}") || { echo "bisect: unknown commit $good" >&2; exit 2; }
bad_c=$(git rev-parse --verify -q "$bad^{commit}") || { echo "bisect: unknown commit $bad" >&2; exit 2; }
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "bisect: the work tree has uncommitted changes; commit or stash them first" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4bisect.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$0" "$tmp/step.sh"
chmod +x "$tmp/step.sh"
mkdir "$tmp/reports"

git bisect start "$bad_c" "$good_c" >/dev/null || { echo "bisect: git bisect start failed" >&2; exit 2; }
git bisect run "$tmp/step.sh" --step "$tmp/reports" "$@" >"$tmp/run.log" 2>&1
grep '^bisect: ' "$tmp/run.log"
first=$(git rev-parse --verify -q refs/bisect/bad)
found=0
if grep -q "is the first bad commit" "$tmp/run.log"; then
    found=1
fi
git bisect log >"$tmp/bisect.log" 2>/dev/null
git bisect reset >/dev/null 2>&1

if [ $found -eq 1 ] && [ -n "$first" ]; then
    echo "first bad commit: $(git log -1 --format='%H %s' "$first")"
    if [ -f "$tmp/reports/$first.report" ]; then
        echo "its failing report (dsv4check $*):"
        grep -v "^PASS " "$tmp/reports/$first.report" | head -n 200 | sed "s/^/  /"
    fi
    exit 0
fi
echo "bisect: no first bad commit found (skipped commits, or GOOD is not good); git bisect said:"
sed -n '/first bad commit\|could be any of\|only skipped/,$p' "$tmp/run.log" | head -20
exit 1
