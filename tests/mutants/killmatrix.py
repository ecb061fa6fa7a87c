#!/usr/bin/env python3
"""killmatrix.py - the kill matrix of the mutant catalogue (`make mutants`).

Runs every mutant of tests/mutants/catalogue.def (a plug-in built from the
reference with one planted bug, build/mutants/libmut_<id>.so) on the ci
cases of its op (`dsv4check run SUITE --filter '^<op>/' --json ...`), a few
mutants at a time, and prints one entry per mutant: the expected outcome,
dsv4check's exit code, the cases that killed it, the first failure's place
(the locator text) and the report's hint.  Exit status 1 when a mutant that
should be killed survives (or errors) or a legitimate one fails.

Only the standard library: the machine that runs `make check` has Debian's
python3 and nothing else is needed."""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ENTRY = re.compile(
    r'^MUTANT\(\s*(\w+)\s*,\s*(\w+)\s*,\s*((?:"[^"]*"\s*)+),\s*(KILLED|PASSES)\s*,'
    r'\s*((?:"[^"]*"\s*)+),\s*((?:"[^"]*"\s*)+)\)',
    re.M)


def c_string(text):
    """Adjacent C string literals, concatenated."""
    return ''.join(re.findall(r'"([^"]*)"', text))


def read_catalogue(path):
    with open(path, encoding='utf-8') as f:
        text = re.sub(r'/\*.*?\*/', '', f.read(), flags=re.S)
    found = [m.groups() for m in ENTRY.finditer(text)]
    lines = len(re.findall(r'^MUTANT\(', text, re.M))
    if lines != len(found):
        sys.exit('killmatrix: %s: %d MUTANT( lines but %d parse (see the format in its header)'
                 % (path, lines, len(found)))
    ids = [g[0] for g in found]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit('killmatrix: %s: duplicate ids %s' % (path, ', '.join(sorted(dup))))
    return [dict(id=g[0], op=g[1], variants=c_string(g[2]), expect=g[3], planted=c_string(g[4]),
                 killers=c_string(g[5])) for g in found]


def run_mutant(args, mut, outdir):
    lib = os.path.join(args.plugins, 'libmut_%s.so' % mut['id'])
    report = os.path.join(outdir, '%s.json' % mut['id'])
    cmd = [args.dsv4check, 'run', args.suite, '--impl', lib, '--filter', '^%s/' % mut['op'], '--json', report]
    env = dict(os.environ, OPENBLAS_NUM_THREADS='1')
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=args.timeout, check=False)
        rc, console = p.returncode, p.stdout.decode('utf-8', 'replace')
    except subprocess.TimeoutExpired:
        rc, console = 'timeout', 'killmatrix: over %d s' % args.timeout
    cases = []
    if os.path.exists(report):
        with open(report, encoding='utf-8') as f:
            cases = json.load(f).get('cases', [])
    return dict(mut, rc=rc, console=console, cases=cases, seconds=time.time() - t0)


def first_failure(case):
    """(output, place, hint) of a failing case's first failing output."""
    for out in case.get('outputs', []):
        if out.get('verdict') != 'FAIL':
            continue
        place = out.get('message', '')
        firsts = out.get('first') or []
        if firsts:
            f = firsts[0]
            place = '%s %s: expected %s, actual %s' % (out['name'], f.get('index', ''), f.get('expected'),
                                                      f.get('actual'))
            if f.get('where'):
                place += ' (%s)' % f['where']
        else:
            place = '%s: %s' % (out['name'], place)
        return place, out.get('hint', '')
    return case.get('error', '') or 'failed', ''


def worst_ratio(cases):
    """Largest err/bound over the float outputs of the cases that ran."""
    worst = None
    for c in cases:
        for out in c.get('outputs', []):
            if out.get('policy', {}).get('kind') == 'float':
                r = out.get('metrics', {}).get('worst_ratio')
                if isinstance(r, str):  # the report writes non-finite numbers as strings
                    r = float(r) if r.lower().lstrip('+-') in ('inf', 'infinity', 'nan') else None
                if r is not None and (worst is None or not r <= worst):
                    worst = r
    return worst


def judge(res):
    """The mutant's outcome word and whether it is what the catalogue expects."""
    ran = [c for c in res['cases'] if c.get('result') != 'SKIP']
    killers = [c for c in ran if c.get('result') == 'FAIL']
    res['ran'], res['killed_by'] = ran, killers
    if res['expect'] == 'KILLED':
        if res['rc'] == 1 and killers:
            return 'killed', True
        return ('SURVIVED' if res['rc'] == 0 else 'ERROR'), False
    if res['rc'] == 0 and ran:
        return 'passed', True
    return ('FALSE-ALARM' if res['rc'] == 1 else 'ERROR' if ran or res['rc'] != 77 else 'NOT-RUN'), False


def names(cases, limit=3):
    shown = ', '.join(c['name'] for c in cases[:limit])
    return shown + (', +%d more' % (len(cases) - limit) if len(cases) > limit else '')


def print_matrix(results, out, verbose):
    w_id = max(len('mutant'), max(len(r['id']) for r in results))
    w_op = max(len('op'), max(len(r['op']) for r in results))
    fmt = '%%-%ds  %%-%ds  %%-7s %%-5s %%-11s %%s' % (w_id, w_op)
    print(fmt % ('mutant', 'op', 'expect', 'exit', 'outcome', 'failed/ran: cases that failed'), file=out)
    for r in results:
        word, ok = r['outcome']
        n_ran, n_kill = len(r['ran']), len(r['killed_by'])
        detail = '%d/%d' % (n_kill, n_ran)
        if n_kill:
            detail += ' ' + names(r['killed_by'], 2)
        warned = [c for c in r['ran'] if c.get('result') == 'WARN']
        if warned and r['expect'] == 'KILLED':
            detail += '; only warned: %s' % names(warned, 2)
        wr = worst_ratio(r['ran'])
        if r['expect'] == 'PASSES' and wr is not None:
            detail += '; worst err/bound %.3g' % wr
        print(fmt % (r['id'], r['op'], r['expect'].lower(), r['rc'], word, detail), file=out)
        if verbose:
            print('    planted: %s' % r['planted'], file=out)
        if r['killed_by']:
            place, hint = first_failure(r['killed_by'][0])
            line = '%s %s' % (r['killed_by'][0]['name'], place)
            print('    first: %s' % (line if len(line) <= 200 else line[:197] + '...'), file=out)
            if hint:
                print('    hint: %s' % hint, file=out)
        elif not ok:
            errs = [c for c in r['ran'] if c.get('error')]
            if errs:
                print('    error: %s: %s' % (errs[0]['name'], errs[0]['error']), file=out)
            elif r['rc'] not in (0, 1):
                tail = r['console'].strip().splitlines()[-3:]
                print('    dsv4check: %s' % ' | '.join(tail), file=out)
            if r['expect'] == 'KILLED':
                print('    expected killers: %s' % r['killers'], file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--dsv4check', required=True)
    ap.add_argument('--plugins', required=True, help='folder of libmut_<id>.so')
    ap.add_argument('--catalogue', required=True)
    ap.add_argument('--suite', required=True)
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--timeout', type=int, default=300, help='seconds per mutant')
    ap.add_argument('--only', help='regex: run the mutants whose id matches')
    ap.add_argument('-v', '--verbose', action='store_true', help='also print what each mutant plants')
    args = ap.parse_args()
    muts = read_catalogue(args.catalogue)
    if args.only:
        muts = [m for m in muts if re.search(args.only, m['id'])]
    if not muts:
        sys.exit('killmatrix: no mutant selected')
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='killmatrix.') as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda m: run_mutant(args, m, tmp), muts))
    for r in results:
        r['outcome'] = judge(r)
    print_matrix(results, sys.stdout, args.verbose)
    bad = [r for r in results if not r['outcome'][1]]
    kills = [r for r in results if r['expect'] == 'KILLED']
    passes = [r for r in results if r['expect'] == 'PASSES']
    print('kill matrix: %d mutants; %d of %d real bugs killed, %d of %d legitimate variations passed (%.0f s)'
          % (len(results), sum(r['outcome'][1] for r in kills), len(kills), sum(r['outcome'][1] for r in passes),
             len(passes), time.time() - t0))
    if bad:
        print('kill matrix: FAIL: %s' % ', '.join('%s (%s)' % (r['id'], r['outcome'][0]) for r in bad))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
