#!/usr/bin/env bash
# test_citations.sh - scripts/check-citations.sh on a scratch repository:
# a clean tree passes; every kind of planted bad line is reported with its
# file:line; docs/, tests/fuzz/corpus/ and untracked files are not checked;
# look-alikes (an RNG seed, "specials", "issue loads") are not reported;
# citations of missing pages or tags are.  The bad names are assembled from
# pieces so that this file itself stays clean.
set -u
export LC_ALL=C

here=$(cd "$(dirname "$0")/.." && pwd)
checker=$here/scripts/check-citations.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0

ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }

repo=$tmp/repo
mkdir -p "$repo/docs/semantics" "$repo/src" "$repo/tests/fuzz/corpus/cases"
cd "$repo" || exit 1
git init -q . && git config user.email t@example.com && git config user.name test

cat > docs/semantics/indices.md <<'EOF'
# Index pages
## A5 Builders
### A5.6 Global top-k
## A6 Combine
### A6.2 Canonical
EOF
cat > docs/semantics/quant.md <<'EOF'
# Quant
## Q1 MXFP4
### Q1.1 Scale rules
EOF
cat > docs/semantics/README.md <<'EOF'
# Index
See indices.md A6.2 and quant.md Q1, Q1.1.
EOF
# Citations that resolve, and look-alikes that must not be reported.
cat > src/good.c <<'EOF'
/* (docs/semantics/indices.md A6.2) */
/* docs/semantics/indices.md A5.6, A6 and docs/semantics/quant.md Q1.1 */
/* see docs/semantics/README.md, docs/semantics/quant.md */
int specials = 0; /* seed: 11, --seed 3, an aspect 2 */
/* the kernel can issue loads early; the shared memory tile */
EOF
git add -A && git commit -qm clean

out=$("$checker" "$repo" 2>&1); rc=$?
if [ $rc -eq 0 ]; then ok; else bad "clean tree: exit $rc, expected 0: $out"; fi

# One planted line per rule (a): file, line number, text.
SH="shar""ed"; MD=".m""d"; SP="sp""ec"; IS="iss""ue"; SD="se""ed"; AN="anch""ors"
planted=(
    "src/a1.c|2|/* ../$SH/spec/x */"
    "src/a2.c|1|/* as in design$MD section 5 */"
    "src/a3.c|3|/* $AN$MD 5.5 */"
    "src/a4.c|1|/* $AN 5.5 */"
    "src/a5.c|2|/* toolchain$MD 2 */"
    "src/a6.c|1|/* sparse_attention$MD 6.2 */"
    "src/a7.c|1|/* quant_and_indexer$MD 7 */"
    "src/a8.c|1|/* ($SP 6.2) */"
    "src/a9.c|2|/* $SP quant 2 */"
    "src/a10.c|1|# $SP sparse_attention 5"
    "src/a11.c|1|/* ($IS 8.5) */"
    "src/a12.c|1|/* see $IS #8 */"
    "src/a13.c|1|/* $SD 000, _prefill */"
    "src/a14.c|1|/* 000_2c64f3fb""85d9f20a */"
    "src/a15.yaml|4|  # ---- combine ($SP 6) ----"
    "src/a16.c|1|/* [$SP 2.4 [S22]] */"
)
for p in "${planted[@]}"; do
    IFS='|' read -r f n text <<<"$p"
    : > "$f"
    for ((i = 1; i < n; i++)); do echo "/* filler */" >> "$f"; done
    echo "$text" >> "$f"
done
# Not checked: docs/, the fuzz corpus, untracked files.
echo "/* ($SP 6.2) design$MD */" > docs/notes.md
echo "# ($SP 6.2) $SH/" > tests/fuzz/corpus/cases/x.yaml
git add -A && git commit -qm planted
echo "/* ($SP 6.2) */" > src/untracked.c

out=$("$checker" "$repo" 2>&1); rc=$?
if [ $rc -eq 1 ]; then ok; else bad "planted lines: exit $rc, expected 1"; fi
for p in "${planted[@]}"; do
    IFS='|' read -r f n _ <<<"$p"
    if grep -q "^$f:$n: " <<<"$out"; then ok; else bad "planted $f:$n not reported"; fi
done
for f in docs/notes.md tests/fuzz/corpus/cases/x.yaml src/untracked.c src/good.c; do
    if grep -q "^$f:" <<<"$out"; then bad "$f reported: $(grep "^$f:" <<<"$out")"; else ok; fi
done
# Each planted line is reported once per rule it breaks, nothing else.
n_rep=$(grep -c '^src/' <<<"$out")
if [ "$n_rep" -ge "${#planted[@]}" ]; then ok; else bad "only $n_rep reports for ${#planted[@]} planted lines"; fi

# (b) citations of pages and tags that do not exist.
git rm -q src/a*.c src/a*.yaml && git commit -qm "no planted lines"
DS="docs/sem""antics"
cat > src/cite.c <<EOF
/* fine: ($DS/indices.md A6.2) */
/* ($DS/nosuch.md A1) */
/* ($DS/indices.md A6.9) */
/* $DS/quant.md Q1, Q7 */
EOF
echo "And indices.md A""7 is not a section." >> docs/semantics/README.md
git add -A && git commit -qm cites
out=$("$checker" "$repo" 2>&1); rc=$?
if [ $rc -eq 1 ]; then ok; else bad "bad citations: exit $rc, expected 1"; fi
for want in "src/cite.c:2: citation of a missing page $DS/nosuch.md" \
            "src/cite.c:3: $DS/indices.md has no section A6.9" \
            "src/cite.c:4: $DS/quant.md has no section Q7" \
            "docs/semantics/README.md:3: $DS/indices.md has no section A7"; do
    if grep -qF "$want" <<<"$out"; then ok; else bad "not reported: $want"; fi
done
if grep -q "^src/cite.c:1:\|README.md:2:" <<<"$out"; then bad "a valid citation reported: $out"; else ok; fi
if grep -q "quant.md has no section Q1\$" <<<"$out"; then bad "Q1 reported missing"; else ok; fi

# Not a work tree: bad usage.
"$checker" "$tmp" >/dev/null 2>&1; rc=$?
if [ $rc -eq 2 ]; then ok; else bad "outside a work tree: exit $rc, expected 2"; fi

echo "test_citations: $checks checks, $fails failures"
[ $fails -eq 0 ]
