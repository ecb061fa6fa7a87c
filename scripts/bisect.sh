#!/usr/bin/env bash
# bisect.sh - find the commit that introduced a numerical regression.
#
# Your kernel's history, judged by this harness (held fixed):
#   scripts/bisect.sh --repo DIR --build 'CMD' [--drift F --baseline JSON] GOOD BAD -- COMMAND...
#   e.g. scripts/bisect.sh --repo ~/mykernels --build 'make libk.so' v1.2 HEAD -- \
#            run cases/ci.yaml --filter combine --impl {repo}/libk.so
#        scripts/bisect.sh --repo ~/mykernels --build 'true' v1.2 HEAD -- \
#            python3 -m dsv4check run cases/ci.yaml --impl mykernels.dsv4:IMPL
# drives `git bisect run` in DIR: at each commit CMD runs in DIR (sh -c; a
# failure is 125, skip), then COMMAND runs from the directory bisect.sh was
# started in (this dsv4check checkout), with {repo} in its words replaced
# by DIR's absolute path and DSV4_BISECT_REPO / DSV4_BISECT_COMMIT set.
# COMMAND is a command line (build/dsv4check ..., python3 -m dsv4check ...);
# one that starts with a dsv4check command (run, check, identify) runs
# build/dsv4check (or $DSV4CHECK) of this checkout.
# --drift F --baseline JSON: also bad is a commit whose error grew by more
# than F since the baseline (a --json report, e.g. of GOOD) while still
# inside tolerance: COMMAND gets --baseline JSON --drift-factor F --strict.
#
# dsv4check's own history (the harness is what changed):
#   scripts/bisect.sh --self GOOD BAD -- <dsv4check arguments>
#   e.g. scripts/bisect.sh --self v0.1.0 HEAD -- run cases/ci.yaml --filter combine
# builds build/dsv4check (`make build/dsv4check`) at each commit of this
# repository and runs it with the arguments.
#
# Exit codes for git bisect: the judge's 0 (passed) -> 0 good, 1 (tolerance
# violation, or drift with --strict) -> 1 bad; a build failure and the
# judge's 2/3/77 (bad input at that commit, a runtime error, no GPU) -> 125
# skip.  At the end it prints the first bad commit and the failing report
# the judge printed there, and resets the bisect (the checkout returns to
# where it was).  The work tree bisected must be clean.  MAKEFLAGS passes
# through (e.g. MAKEFLAGS=-j4).  Exit: 0 found, 1 not found, 2 usage or git
# error.
set -uo pipefail

# One bisect step, run by git bisect from a copy of this script (the
# bisected commits may not have it).  $1: the report directory.
if [ "${1:-}" = "--step" ] || [ "${1:-}" = "--repo-step" ]; then
    mode=$1
    reports=$2
    shift 2
    commit=$(git rev-parse HEAD)
    subject=$(git log -1 --format='%h %s')
    if [ "$mode" = "--step" ]; then
        # SAN/BUILD pinned: a caller inside `make SAN=1` exports SAN=1 to us.
        build=(make SAN=0 BUILD=build build/dsv4check)
        judge_dir=.
        judge=(build/dsv4check "$@")
    else
        buildcmd=$1 judge_dir=$2
        shift 2
        build=(sh -c "$buildcmd")
        judge=("$@")
    fi
    if ! "${build[@]}" >"$reports/$commit.build" 2>&1; then
        echo "bisect: $subject does not build: skip (125)"
        exit 125
    fi
    (cd "$judge_dir" && DSV4_BISECT_COMMIT=$commit "${judge[@]}") >"$reports/$commit.report" 2>&1
    rc=$?
    case $rc in
        0) verdict="good"; code=0 ;;
        1) if grep -q '^drift: [1-9]' "$reports/$commit.report"; then
               verdict="bad (drift beyond the factor)"
           else
               verdict="bad (tolerance violation)"
           fi
           code=1 ;;
        *) verdict="untestable (exit $rc): skip"; code=125 ;;
    esac
    echo "bisect: $subject: $verdict"
    exit $code
fi

usage() {
    echo "usage: $0 --repo DIR --build 'CMD' [--drift F --baseline JSON] GOOD BAD -- COMMAND..." >&2
    echo "       $0 --self GOOD BAD -- <dsv4check arguments>" >&2
    exit 2
}

mode="" repo="" buildcmd="" drift="" baseline=""
while [ $# -gt 0 ]; do
    case $1 in
        --self) mode=self; shift ;;
        --repo) [ $# -ge 2 ] || usage; mode=repo; repo=$2; shift 2 ;;
        --build) [ $# -ge 2 ] || usage; buildcmd=$2; shift 2 ;;
        --drift) [ $# -ge 2 ] || usage; drift=$2; shift 2 ;;
        --baseline) [ $# -ge 2 ] || usage; baseline=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "bisect: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ -n "$mode" ] || { echo "bisect: say what to bisect: --repo DIR (your kernel) or --self (dsv4check)" >&2; usage; }
[ $# -ge 4 ] && [ "$3" = "--" ] || usage
good=$1 bad=$2
shift 3
if [ "$mode" = self ] && { [ -n "$buildcmd" ] || [ -n "$drift" ] || [ -n "$baseline" ]; }; then
    echo "bisect: --build, --drift and --baseline go with --repo" >&2
    usage
fi
if [ "$mode" = repo ] && [ -z "$buildcmd" ]; then
    echo "bisect: --repo needs --build 'CMD' (e.g. --build make; --build true when nothing builds)" >&2
    usage
fi
if [ -n "$drift$baseline" ] && { [ -z "$drift" ] || [ -z "$baseline" ]; }; then
    echo "bisect: --drift F and --baseline JSON go together" >&2
    usage
fi
if [ -n "$drift" ] && ! [[ $drift =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "bisect: --drift $drift: a factor such as 2 or 1.5" >&2
    exit 2
fi

harness=$(pwd)
if [ "$mode" = repo ]; then
    [ -d "$repo" ] || { echo "bisect: --repo $repo: not a folder" >&2; exit 2; }
    repo=$(cd "$repo" && git rev-parse --show-toplevel 2>/dev/null) ||
        { echo "bisect: --repo: not in a git repository" >&2; exit 2; }
    [ -z "$baseline" ] || [ -f "$baseline" ] || { echo "bisect: --baseline $baseline: no such file" >&2; exit 2; }
    [ -z "$baseline" ] || baseline=$(cd "$(dirname "$baseline")" && pwd)/$(basename "$baseline")
    # The judge: {repo} replaced; a bare dsv4check command runs this checkout's.
    judge=()
    for w in "$@"; do judge+=("${w//\{repo\}/$repo}"); done
    case ${judge[0]} in
        run|check|identify) judge=("${DSV4CHECK:-$harness/build/dsv4check}" "${judge[@]}") ;;
    esac
    command -v "${judge[0]}" >/dev/null ||
        { echo "bisect: ${judge[0]}: no such program (run make in $harness first?)" >&2; exit 2; }
    [ -z "$drift" ] || judge+=(--baseline "$baseline" --drift-factor "$drift" --strict)
    gitdir=$repo
else
    git rev-parse --git-dir >/dev/null 2>&1 || { echo "bisect: not in a git repository" >&2; exit 2; }
    gitdir=$harness
fi

g() { git -C "$gitdir" "$@"; }
good_c=$(g rev-parse --verify -q "$good^{commit}") || { echo "bisect: unknown commit $good" >&2; exit 2; }
bad_c=$(g rev-parse --verify -q "$bad^{commit}") || { echo "bisect: unknown commit $bad" >&2; exit 2; }
if [ -n "$(g status --porcelain --untracked-files=no)" ]; then
    echo "bisect: $gitdir has uncommitted changes; commit or stash them first" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4bisect.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$0" "$tmp/step.sh"
chmod +x "$tmp/step.sh"
mkdir "$tmp/reports"

g bisect start "$bad_c" "$good_c" >/dev/null || { echo "bisect: git bisect start failed" >&2; exit 2; }
if [ "$mode" = repo ]; then
    DSV4_BISECT_REPO=$repo g bisect run "$tmp/step.sh" --repo-step "$tmp/reports" "$buildcmd" "$harness" \
        "${judge[@]}" >"$tmp/run.log" 2>&1
    shown="${judge[*]}"
else
    g bisect run "$tmp/step.sh" --step "$tmp/reports" "$@" >"$tmp/run.log" 2>&1
    shown="dsv4check $*"
fi
grep '^bisect: ' "$tmp/run.log"
first=$(g rev-parse --verify -q refs/bisect/bad)
found=0
if grep -q "is the first bad commit" "$tmp/run.log"; then
    found=1
fi
g bisect log >"$tmp/bisect.log" 2>/dev/null
g bisect reset >/dev/null 2>&1

if [ $found -eq 1 ] && [ -n "$first" ]; then
    echo "first bad commit: $(g log -1 --format='%H %s' "$first")"
    if [ -f "$tmp/reports/$first.report" ]; then
        echo "its failing report ($shown):"
        grep -v "^PASS " "$tmp/reports/$first.report" | head -n 200 | sed "s/^/  /"
    fi
    exit 0
fi
echo "bisect: no first bad commit found (skipped commits, or GOOD is not good); git bisect said:"
sed -n '/first bad commit\|could be any of\|only skipped/,$p' "$tmp/run.log" | head -20
exit 1
