#!/usr/bin/env bash
# check-citations.sh [ROOT] - the repository cites only itself.
#
# Fails (exit 1), listing file:line, when
#  (a) a tracked text file outside docs/ and tests/fuzz/corpus/ names material
#      outside the repository (the shared folder, the design and anchor notes,
#      the toolchain note, the two research notes by file name or as "spec N",
#      the seed pages by file name) or an issue number;
#  (b) a citation "docs/semantics/<page>.md <TAG>" names a page that does not
#      exist or a tag (A6.2, Q4.1, ...) that is not a heading of that page.
#      Inside docs/semantics/ the bare form "<page>.md <TAG>" is checked too.
# Every line is checked, code and strings included: a message or a variant
# doc that cites the notes is as stale as a comment.  Exit 0 when clean,
# 2 on bad usage (not a git work tree).
set -u
export LC_ALL=C

root=${1:-.}
cd "$root" || { echo "check-citations: cannot enter $root" >&2; exit 2; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "check-citations: $root is not a git work tree" >&2; exit 2; }

outside=(-- . ':(exclude)docs/' ':(exclude)tests/fuzz/corpus/')
fail=0

# (a) One pattern per kind of reference, then " @@ " and the reason reported.
# The patterns are written so that they do not match their own text.
rules=(
    'shared[/] @@ a path into the shared folder outside the repository'
    '(^|[^a-z_/])design[.]md @@ the design note (outside the repository)'
    '(^|[^a-z_])anchors([.]md| +[0-9]) @@ the anchors note (outside the repository)'
    'toolchain[.]md @@ the toolchain note (outside the repository)'
    '(^|[^/])sparse_attention[.]md @@ a research note by file name: cite docs/semantics/<page>.md A<n>'
    '(^|[^/])quant_and_indexer[.]md @@ a research note by file name: cite docs/semantics/<page>.md Q<n>'
    '(^|[^a-z_])spec +(quant|sparse) @@ a research note named "spec" + name: cite docs/semantics/<page>.md <tag>'
    '(^|[^a-z_])spec[ .]*[0-9] @@ a research note section ("spec N"): cite docs/semantics/<page>.md <tag>'
    '(^|[^a-z_])seeds? +0{2}[0-9] @@ a seed page by file name: name its vLLM module ([SEED1], [SEED2])'
    '[0-9]{3}_[0-9a-f]{16} @@ a seed page by file name: name its vLLM module ([SEED1], [SEED2])'
    '(^|[^a-z_])issues? *#?[0-9] @@ an issue number: state the reason itself'
)
found=""
for rule in "${rules[@]}"; do
    pat=${rule%% @@ *}
    why=${rule#* @@ }
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        loc=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; text=${rest#*:}
        text=$(printf '%s' "$text" | sed 's/^[[:space:]]*//' | cut -c1-120)
        found+="$loc:$line: $why: $text"$'\n'
        fail=1
    done < <(git grep -n -I -i -E -e "$pat" "${outside[@]}")
done

# A line that breaks several rules is listed once, with the first reason.
[ -z "$found" ] || printf '%s' "$found" | sort -t: -k1,1 -k2,2n -s -u

# (b) Citations into docs/semantics/: the page exists and every tag is one
# of its headings ("## A6 ...", "### A6.2 ...").
tag='[AQ][0-9]+([.][0-9]+)*'
sep=' *(,|/|-|and|or)? *'
cited_re="docs/semantics/[A-Za-z0-9_-]+[.]md( +$tag($sep$tag)*)?"
bare_re="(^|[^/A-Za-z0-9_])(README|numerics|indices|attention|kvcache|quant|gemm|indexer)[.]md( +$tag($sep$tag)*)"

check_one() { # file line page tags...
    local file=$1 line=$2 page=$3 t
    shift 3
    if [ ! -f "$page" ]; then
        printf '%s:%s: citation of a missing page %s\n' "$file" "$line" "$page"
        return 1
    fi
    local rc=0
    for t in "$@"; do
        if ! grep -qE "^#+ ${t//./[.]}( |\$)" "$page"; then
            printf '%s:%s: %s has no section %s\n' "$file" "$line" "$page" "$t"
            rc=1
        fi
    done
    return $rc
}

scan() { # dir-prefix regex pathspec...
    local prefix=$1 re=$2 hit file rest line cite page tags
    shift 2
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; cite=${rest#*:}
        cite=$(printf '%s' "$cite" | sed -E 's/^[^A-Za-z]*//')
        page=$prefix${cite%%.md*}.md
        tags=$(printf '%s' "${cite#*.md}" | grep -oE "$tag" || true)
        # shellcheck disable=SC2086
        check_one "$file" "$line" "$page" $tags || fail=1
    done < <(git grep -n -I -o -E -e "$re" "$@")
}

scan "" "$cited_re" -- .
scan "docs/semantics/" "$bare_re" -- docs/semantics/

if [ $fail -ne 0 ]; then
    echo "check-citations: FAILED (cite docs/semantics/<page>.md <tag>; see docs/semantics/README.md)"
    exit 1
fi
echo "check-citations: clean"
