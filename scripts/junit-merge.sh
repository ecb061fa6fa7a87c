#!/usr/bin/env bash
# junit-merge.sh OUT.xml IN.xml... - merge the JUnit reports of shards (or
# of several runs) into one file: one <testsuites> element holding every
# input's <testsuite> elements unchanged, with the totals summed on
# <testsuites>.  Works on the reports dsv4check --junit writes.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT.xml IN.xml..." >&2; exit 2; }
out=$1
shift
tmp="$out.tmp.$$"
# An unreadable input fails the merge; leave no half-written file behind.
trap 'rm -f "$tmp"' EXIT
awk '
  FNR == 1 { inside = 0 }
  /<testsuites>/ { inside = 1; next }
  /<\/testsuites>/ { inside = 0; next }
  inside {
    body = body $0 "\n"
    if ($0 ~ /<testsuite /) {
      for (k = 1; k <= 4; k++) {
        split("tests failures errors skipped", names, " ")
        if (match($0, names[k] "=\"[0-9]+\"")) {
          v = substr($0, RSTART + length(names[k]) + 2, RLENGTH - length(names[k]) - 3)
          total[names[k]] += v
        }
      }
    }
  }
  END {
    print "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
    printf "<testsuites tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n", \
      total["tests"], total["failures"], total["errors"], total["skipped"]
    printf "%s", body
    print "</testsuites>"
  }' "$@" > "$tmp"
mv "$tmp" "$out"
