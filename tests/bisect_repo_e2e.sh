#!/usr/bin/env bash
# bisect_repo_e2e.sh - end-to-end test of `scripts/bisect.sh --repo` (run by
# tests/test_bisect.c from the repository root, after `make`): a scratch git
# repository of a small C plug-in kernel (tests/plugin_example.c, built with
# its own Makefile against include/dsv4_plugin.h) with
#   c1 good -> c2 clean -> c3 planted in-tolerance drift (row 0's first
#   index one off: 1 mismatch, inside the suite's 1% budget) -> c4 broken
#   build -> c5 build fixed -> c6 planted regression (every window index one
#   off: far past the budget) -> c7 clean
# judged by this checkout's build/dsv4check on a two-case suite with that
# budget.  Bisects twice: for the regression (expects c6), and with
# --drift 2 --baseline (c1's --json report; expects c3).  Prints
# "C3=<sha> C6=<sha>", then each bisect's output after "== regression" and
# "== drift".  Exit: 0, or the first failing step's code (99 on a setup
# error).  (A Python-module kernel judged through `python3 -m dsv4check` is
# not part of it: this checkout has no Python front end.)
set -euo pipefail
src=$(pwd)
exe=${DSV4CHECK:-$src/build/dsv4check}
case $exe in /*) ;; *) exe=$src/$exe ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4bisect-repo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/kernel
mkdir "$repo"
sed 's|"../include/dsv4_plugin.h"|"dsv4_plugin.h"|' tests/plugin_example.c >"$repo/kernel.c"
cp include/dsv4_plugin.h "$repo/"
printf 'libkernel.so: kernel.c dsv4_plugin.h\n\t$${CC:-cc} -std=c11 -O1 -shared -fPIC -o $@ kernel.c\n' >"$repo/Makefile"
echo libkernel.so >"$repo/.gitignore"
cat >"$tmp/suite.yaml" <<'EOF'
suite: bisect-budget
defaults:
  tolerance: {combined_indices: {budget: 0.01}}
cases:
  - name: prefill_mixed
    op: combine_topk_swa_indices
    seed: 1
    params: {compress_ratio: 4, topk: 512, window_size: 128,
             query_lens: [1, 1, 37, 300], prefix_lens: [200, 7, 0, 1000]}
  - name: decode_only
    op: combine_topk_swa_indices
    seed: 2
    params: {compress_ratio: 4, topk: 512, window_size: 128,
             query_lens: [1, 1, 1, 1], prefix_lens: [50, 300, 700, 2000]}
EOF
cd "$repo"
git init -q . && git config user.email t@example.com && git config user.name test
git config commit.gpgsign false
commit() { git add -A && git commit -qm "$1" && git rev-parse HEAD; }
plant() { # file, sed expression, what must change
    cp "$1" "$1.orig"
    sed -i "$2" "$1"
    if cmp -s "$1" "$1.orig"; then echo "cannot plant $3"; exit 99; fi
    rm "$1.orig"
}
c1=$(commit "c1: good")
echo "a kernel for dsv4check" >README
commit "c2: clean" >/dev/null
plant kernel.c 's/if (t < perturb \&\& P > 0)/if (t < 1 \&\& P > 0)/' "the drift"
c3=$(commit "c3: planted drift (row 0's first index one off, inside the budget)")
echo '#error planted build failure' >>kernel.c
commit "c4: broken build" >/dev/null
sed -i '/#error planted build failure/d' kernel.c
commit "c5: build fixed" >/dev/null
plant kernel.c 's/(first + i - gathered_from));/(first + i - gathered_from) + 1);/' "the regression"
c6=$(commit "c6: planted regression (every window index one off)")
echo "more words" >>README
c7=$(commit "c7: clean")
# The baseline: c1's report, as the nightly job on the good commit writes it.
git checkout -q "$c1" && make -s libkernel.so >/dev/null
(cd "$src" && "$exe" run "$tmp/suite.yaml" --impl "$repo/libkernel.so" --json "$tmp/base.json" >/dev/null)
git checkout -q - && rm -f libkernel.so
cd "$src"
echo "C3=$c3 C6=$c6"
echo "== regression"
rc=0
scripts/bisect.sh --repo "$repo" --build make "$c1" "$c7" -- run "$tmp/suite.yaml" --impl '{repo}/libkernel.so' || rc=$?
[ $rc -eq 0 ] || exit $rc
echo "== drift"
scripts/bisect.sh --repo "$repo" --build make --drift 2 --baseline "$tmp/base.json" "$c1" "$c7" -- \
    run "$tmp/suite.yaml" --impl '{repo}/libkernel.so' || rc=$?
[ "$(git -C "$repo" rev-parse HEAD)" = "$c7" ] || { echo "the kernel's checkout was not restored"; exit 98; }
exit $rc
