#!/bin/sh
# test_install.sh - `make install` into a DESTDIR, then, against that tree
# only: a C program using include/dsv4check.h built with
# `pkg-config --cflags --libs dsv4check` (shared, and static with
# --static), and the installed Python package, which finds the library
# directory `make install` recorded for it.  Run from the repository root;
# BUILD, CC, SANFLAGS, PYTHON as the Makefile passes them.
set -eu
BUILD=${BUILD:-build}
CC=${CC:-cc}
SANFLAGS=${SANFLAGS:-}
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
prefix=/usr/local
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site="$prefix/lib/python$pyver/dist-packages"

make --no-print-directory -s install DESTDIR="$root" PREFIX="$prefix" BUILD="$BUILD" PYTHON="$PYTHON" >/dev/null

cat > "$tmp/t.c" <<'C'
#include <dsv4check.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    char err[512];
    dsv4check_suite *s = NULL;
    if (dsv4check_api_version() != DSV4CHECK_API_VERSION)
        return 10;
    if (argc < 2 || dsv4check_suite_load(argv[1], &s, err, sizeof err) != DSV4CHECK_OK) {
        fprintf(stderr, "%s\n", err);
        return 11;
    }
    printf("%d cases, %d ops\n", dsv4check_suite_count(s), dsv4check_op_count());
    dsv4check_suite_free(s);
    return 0;
}
C
# The tree is used where it lies: prefix redefined (a sysroot would also move the
# -L of the system libraries the static link needs).
export PKG_CONFIG_PATH="$root$prefix/lib/pkgconfig"
pc() { pkg-config --define-variable=prefix="$root$prefix" "$@"; }
cflags=$(pc --cflags dsv4check)
case "$cflags" in *"$root"*) ;; *) echo "test_install: pkg-config --cflags does not point into $root: $cflags"; exit 1 ;; esac
# shellcheck disable=SC2086
$CC $SANFLAGS -o "$tmp/shared" "$tmp/t.c" $cflags $(pc --libs dsv4check)
# shellcheck disable=SC2086
$CC $SANFLAGS -o "$tmp/static" "$tmp/t.c" $cflags \
    $(pc --static --libs dsv4check | sed "s|-ldsv4|$root$prefix/lib/libdsv4.a|")
want=$("$BUILD/dsv4check" list cases/ci.yaml | sed -n '1s/.*: \([0-9]*\) cases/\1/p')
for prog in shared static; do
    got=$(LD_LIBRARY_PATH="$root$prefix/lib" "$tmp/$prog" cases/ci.yaml)
    case "$got" in "$want cases, "*" ops") ;; *) echo "test_install: $prog program printed '$got', want $want cases"; exit 1 ;; esac
done
if ldd "$tmp/static" | grep -q libdsv4; then echo "test_install: the static program loads libdsv4.so"; exit 1; fi

# The installed package: its recorded paths, and it runs on the installed library.
# A sanitized library needs its runtime preloaded into the interpreter (as
# the Makefile's python-tests does; leak checks off: CPython's own).
san_preload=
if [ -n "${SANFLAGS:-}" ]; then
    san_preload="$("${CC:-cc}" -print-file-name=libasan.so) $("${CC:-cc}" -print-file-name=libubsan.so)"
fi
env ${san_preload:+LD_PRELOAD="$san_preload" ASAN_OPTIONS=detect_leaks=0} PYTHONPATH="$root$site" DSV4CHECK_LIB="$root$prefix/lib/libdsv4.so" "$PYTHON" - "$root$site" "$prefix" <<'PY'
import sys
site, prefix = sys.argv[1], sys.argv[2]
import dsv4check
from dsv4check import _installed
assert dsv4check.__file__.startswith(site), dsv4check.__file__
assert (_installed.LIBDIR, _installed.BINDIR) == (prefix + "/lib", prefix + "/bin"), vars(_installed)
import dsv4check.adapters, dsv4check.pytest_plugin  # noqa: E401 - every module is installed
print(len(dsv4check.Suite("cases/ci.yaml")), "cases through the installed package")
PY
echo "test_install: ok ($want cases through the shared and static C programs and the installed package)"
