#!/usr/bin/env bash
# run-tests.sh JOBS LOGDIR PROGRAM... - the unit-test programs, JOBS at a
# time (they share nothing: every one works in its own mkdtemp folder), each
# program's output kept in LOGDIR and printed whole, in the order given, once
# all have run; exit 1 when any failed.  DSV4CHECK is passed through.  check's
# per-test timeouts are hang guards, so they are scaled by the jobs that share
# the cores (CK_TIMEOUT_MULTIPLIER, unless the caller set one).
set -uo pipefail
jobs=${1:?usage: run-tests.sh JOBS LOGDIR PROGRAM...}
logs=${2:?}
shift 2
mkdir -p "$logs"
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-$((jobs > 1 ? 2 * jobs : 1))}
run_one() {
    local name
    name=$(basename "$1")
    "$1" >"$2/$name.log" 2>&1
    echo $? >"$2/$name.rc"
}
export -f run_one
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$logs"
fail=0
for t in "$@"; do
    name=$(basename "$t")
    echo "== $t"
    cat "$logs/$name.log"
    rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 1)
    if [ "$rc" != 0 ]; then
        echo "== $t: exit $rc"
        fail=1
    fi
done
exit $fail
