#!/usr/bin/env bash
# bisect_e2e.sh - end-to-end test of scripts/bisect.sh (run by
# tests/test_ci_features.c from the repository root).  Copies this
# repository's tracked files at HEAD into a scratch git repository and makes
#   c1 good  ->  c2 plants a regression (one window index off by one in
#   ref/indices.c)  ->  c3 breaks the build  ->  c4 fixes the build  ->  c5 clean
# then runs scripts/bisect.sh --self c1 c5 -- run cases/ci.yaml --filter combine
# and prints its output; the C test checks that c2 is named.
# Prints "C2=<sha>" first.  Exit: bisect.sh's exit code, or 99 on a setup error.
set -euo pipefail
src=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4bisect-e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/repo
mkdir "$repo"
git -C "$src" archive HEAD | tar -x -C "$repo" || exit 99
# The script under test is this work tree's, whatever HEAD holds.
cp "$src/scripts/bisect.sh" "$repo/scripts/bisect.sh"
cd "$repo"
git init -q . && git config user.email t@example.com && git config user.name test
git config commit.gpgsign false
commit() { git add -A && git commit -qm "$1" && git rev-parse HEAD; }
c1=$(commit "c1: good")
grep -q '(pos - sw + 1 + i) - g0)' ref/indices.c || { echo "cannot plant: window line not found"; exit 99; }
sed -i 's/(pos - sw + 1 + i) - g0)/(pos - sw + 1 + i) - g0 + (i == 0))/' ref/indices.c
c2=$(commit "c2: planted regression (first window index off by one)")
echo '#error planted build failure' >> ref/indices.c
commit "c3: broken build" >/dev/null
sed -i '/#error planted build failure/d' ref/indices.c
commit "c4: build fixed" >/dev/null
echo "clean change" >> README.md
c5=$(commit "c5: clean")
echo "C2=$c2"
rc=0
MAKEFLAGS=-j2 scripts/bisect.sh --self "$c1" "$c5" -- run cases/ci.yaml --filter combine || rc=$?
exit $rc
