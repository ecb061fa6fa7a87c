#!/usr/bin/env bash
# test_slurm.sh - the README's Slurm-array recipe, end to end, on a one-node
# Slurm that this test starts itself: munged with its own key and socket,
# slurmctld and slurmd on loopback ports, every file under one temp dir.
# The array job (scripts/slurm/shards.sbatch, --array=0-3) runs the ci suite
# in 4 shards, a job depending on it (afterany) merges their JUnit files with
# scripts/junit-merge.sh, and the merged report must hold exactly the
# testcases of an unsharded run, each once, with the same totals.
#
# Usage (from the repository root): DSV4CHECK=build/dsv4check tests/test_slurm.sh
# Exit 0 pass, 1 fail, 77 skip: Slurm or munge not installed
# (scripts/setup.sh --slurm), or the daemons cannot run here (their log
# lines are printed).  Daemons, jobs and the temp dir are removed on every
# exit path.  Bounded: daemon start 30 s each, the jobs 120 s.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
DSV4CHECK=$(realpath "${DSV4CHECK:-build/dsv4check}")
export DSV4CHECK
suite=cases/ci.yaml
shards=4
job_limit_s=120
daemon_limit_s=30
# Backstop for the daemons if this script is killed before its trap runs.
daemon_lifetime_s=600

skip() { echo "test_slurm: SKIP: $*"; exit 77; }
fail() { echo "test_slurm: FAIL: $*"; exit 1; }
note() { echo "test_slurm: $*"; }

for tool in munged mungekey munge slurmctld slurmd sbatch squeue scontrol sinfo scancel; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (scripts/setup.sh --slurm installs slurm-wlm and munge)"
done
[ -x "$DSV4CHECK" ] || fail "$DSV4CHECK is not an executable (make build/dsv4check)"

# Nothing from a surrounding Slurm job or the user's environment may steer
# the private cluster's clients.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SQUEUE|SINFO|SCONTROL|SACCT)_' || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4-slurm.XXXXXX")
conf=$tmp/etc/slurm.conf
export SLURM_CONF=$conf
daemon_pids=()
job_ids=()

# Processes our slurmd started run detached from it (slurmstepd, the job
# scripts).  slurmd and sbatch alone get DSV4_SLURM_TEST=$tmp, so only they
# and what they started carry it; it names this test's temp dir, so no other
# Slurm's processes and none of this script's own.
tag="DSV4_SLURM_TEST=$tmp"
our_job_pids() {
    local e
    for e in /proc/[0-9]*/environ; do
        if grep -qzxF "$tag" "$e" 2>/dev/null; then
            e=${e#/proc/}
            echo "${e%/environ}"
        fi
    done
    return 0
}

any_alive() {
    local pid
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
    return 1
}

# Cancel our jobs while slurmctld still runs and let slurmd end their steps
# (KillWait), then stop the daemons; KILL whatever of ours is left.
teardown() {
    local rc=$? pid
    trap - EXIT INT TERM
    if [ ${#job_ids[@]} -gt 0 ] && any_alive "${daemon_pids[@]}"; then
        timeout 10 scancel "${job_ids[@]}" >/dev/null 2>&1 || true
        for _ in $(seq 30); do
            [ -z "$(timeout 5 squeue -h -j "$(IFS=,; echo "${job_ids[*]}")" -o %i 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
    for pid in "${daemon_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 20); do
        any_alive "${daemon_pids[@]}" || break
        sleep 0.5
    done
    for pid in "${daemon_pids[@]}" $(our_job_pids); do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Print the daemons' last log lines and skip: for a sandbox that cannot run them.
skip_with_logs() {
    local why=$1 f
    echo "test_slurm: SKIP: $why; what the daemons said:"
    for f in "$tmp"/log/*; do
        [ -s "$f" ] || continue
        echo "---- ${f#"$tmp"/} (last 15 lines)"
        tail -n 15 "$f"
    done
    exit 77
}

# Wait until "$@" succeeds while the daemon last started runs, at most
# daemon_limit_s seconds; say why not.
wait_up() {
    local start=$SECONDS pid=${daemon_pids[${#daemon_pids[@]}-1]}
    until "$@" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { why="it exited"; return 1; }
        [ $((SECONDS - start)) -lt "$daemon_limit_s" ] || { why="no answer within ${daemon_limit_s}s"; return 1; }
        sleep 0.5
    done
}

# A port nothing on loopback listens on (connecting to it is refused).
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 1
}

mkdir -p "$tmp"/etc "$tmp"/munge-key "$tmp"/munge "$tmp"/state "$tmp"/spool "$tmp"/run "$tmp"/log "$tmp"/out
chmod 700 "$tmp"/munge-key
chmod 755 "$tmp" "$tmp"/munge

# ---- munge: own key, socket and files, nothing of the system's munge.
sock=$tmp/munge/munge.socket
mungekey --create --keyfile="$tmp/munge-key/munge.key" >"$tmp/log/mungekey.log" 2>&1 ||
    skip_with_logs "mungekey could not create a key"
t0=$SECONDS
# --force: a TMPDIR that munged finds too open must not stop a private test daemon.
timeout -k 5 "$daemon_lifetime_s" munged --foreground --force --socket="$sock" \
    --key-file="$tmp/munge-key/munge.key" --pid-file="$tmp/run/munged.pid" \
    --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/log/munged.log" >"$tmp/log/munged.out" 2>&1 &
daemon_pids+=($!)
munge_roundtrip() { munge --socket="$sock" --no-input | unmunge --socket="$sock"; }
wait_up munge_roundtrip || skip_with_logs "munged: $why"

# ---- slurm.conf: one node, localhost, this machine's CPUs and memory.
# slurmd -C prints this machine's node line (CPUs, sockets, cores, memory).
hw=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* \(CPUs=.*RealMemory=[0-9]*\).*/\1/p' | head -n 1) || true
[ -n "$hw" ] || hw="CPUs=$(nproc) RealMemory=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)"
# Slurm binds its daemons to the address this host's name resolves to when
# told so: do that where it is a loopback one; elsewhere they listen on any
# address, and are still reached on 127.0.0.1 alone.
bind_loopback=
if getent ahostsv4 "$(hostname)" 2>/dev/null | head -n 1 | grep -q '^127\.'; then
    bind_loopback=CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
fi
ctld_port=$(free_port) || skip "no free loopback port"
slurmd_port=$(free_port) || skip "no free loopback port"
[ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))
cat > "$conf" <<CONF
ClusterName=dsv4test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$tmp/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=600
MailProg=/bin/true
$bind_loopback
NodeName=localhost NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=dsv4 Nodes=localhost Default=YES MaxTime=60 State=UP
CONF
: > "$tmp/etc/plugstack.conf"

# ---- slurmctld and slurmd in the foreground (-D), in the background here.
timeout -k 5 "$daemon_lifetime_s" slurmctld -D -f "$conf" >"$tmp/log/slurmctld.out" 2>&1 &
daemon_pids+=($!)
wait_up scontrol ping || skip_with_logs "slurmctld: $why"
env "$tag" timeout -k 5 "$daemon_lifetime_s" slurmd -D -N localhost -f "$conf" >"$tmp/log/slurmd.out" 2>&1 &
daemon_pids+=($!)
node_idle() { [ "$(sinfo -h -n localhost -o %T)" = idle ]; }
wait_up node_idle ||
    skip_with_logs "slurmd: $why, node localhost is $(sinfo -h -n localhost -o %T 2>&1)"
note "one-node Slurm up in $((SECONDS - t0)) s (ports $ctld_port/$slurmd_port${bind_loopback:+ on 127.0.0.1}; $hw)"

# ---- the reference: the same suite unsharded.
"$DSV4CHECK" run "$suite" -j 1 --junit "$tmp/unsharded.xml" >"$tmp/unsharded.log" 2>&1 ||
    fail "the unsharded run failed: $(tail -n 3 "$tmp/unsharded.log")"

# ---- the recipe: the array job, then the merge once every task has ended.
t1=$SECONDS
out=$tmp/out
jid=$(env "$tag" sbatch --parsable --array=0-$((shards - 1)) --time=5 --output="$out/slurm-%A_%a.out" \
    scripts/slurm/shards.sbatch "$suite" "$out" -j 1) || fail "sbatch of the array job failed"
jid=${jid%%;*}
job_ids+=("$jid")
mid=$(env "$tag" sbatch --parsable --dependency=afterany:"$jid" --time=5 --output="$out/merge.out" \
    --wrap "scripts/junit-merge.sh '$out/junit.xml' '$out'/shard-*.xml") || fail "sbatch of the merge job failed"
mid=${mid%%;*}
job_ids+=("$mid")
note "submitted array job $jid (--array=0-$((shards - 1))) and merge job $mid"

jobs_pending() { [ -n "$(squeue -h -j "$jid,$mid" -o %i 2>/dev/null)" ]; }
start=$SECONDS
while jobs_pending; do
    # A launch that fails here (no privileges, a missing plug-in) drains the node.
    node_state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    case "$node_state" in
        drain* | down* | fail*)
            skip_with_logs "slurmd could not launch the jobs: node localhost $node_state ($(sinfo -h -n localhost -o %E))" ;;
    esac
    # A job pending for one of these reasons would never start.
    never=$(squeue -h -j "$jid,$mid" -t PD -o '%i %r' 2>/dev/null |
        grep -E ' ([A-Za-z]*Limit|BadConstraints|DependencyNeverSatisfied|JobHeld[A-Za-z]*|launch failed.*)$' || true)
    [ -z "$never" ] || fail "jobs that cannot start: $never"
    if [ $((SECONDS - start)) -ge "$job_limit_s" ]; then
        squeue -j "$jid,$mid" || true
        fail "jobs not finished within ${job_limit_s}s"
    fi
    sleep 1
done
note "array and merge jobs finished in $((SECONDS - t1)) s"

# ---- every job ended well, each array task ran once.
scontrol -o show job "$jid" > "$tmp/array.state"
scontrol -o show job "$mid" > "$tmp/merge.state"
sed -n 's/.*ArrayTaskId=\([0-9]*\) .*JobState=\([A-Z]*\) .*RunTime=\([0-9:]*\) .*/  task \1: \2 in \3/p' "$tmp/array.state"
states=$(grep -o 'JobState=[A-Z_]* .*ExitCode=[0-9:]*' "$tmp/array.state" | sed 's/ .*ExitCode=/ /' | sort | uniq -c)
tasks_ok=$(grep -c 'JobState=COMPLETED .*ExitCode=0:0' "$tmp/array.state" || true)
if [ "$tasks_ok" != "$shards" ]; then
    for f in "$out"/slurm-*.out; do [ -e "$f" ] && { echo "---- ${f##*/}"; tail -n 5 "$f"; }; done
    fail "array tasks: $tasks_ok of $shards COMPLETED with exit 0 (states: $states)"
fi
grep -q 'JobState=COMPLETED .*ExitCode=0:0' "$tmp/merge.state" ||
    fail "merge job did not complete: $(grep -o 'JobState=[A-Z_]*' "$tmp/merge.state"); $(cat "$out/merge.out" 2>/dev/null)"

# ---- the merged report equals the unsharded one.
merged=$out/junit.xml
[ -s "$merged" ] || fail "no merged report $merged"
totals() { grep -o "<$2 [^>]*" "$1" | head -n 1 | grep -o '\(tests\|failures\|errors\|skipped\)="[0-9]*"' | paste -sd ' '; }
want=$(totals "$tmp/unsharded.xml" testsuite)
got=$(totals "$merged" testsuites)
[ "$got" = "$want" ] || fail "merged totals '$got' differ from the unsharded run's '$want'"
testcases() { grep -o '<testcase classname="[^"]*" name="[^"]*"' "$1" | sort; }
testcases "$tmp/unsharded.xml" > "$tmp/unsharded.lst"
testcases "$merged" > "$tmp/merged.lst"
dups=$(uniq -d "$tmp/merged.lst" | head -n 3)
[ -z "$dups" ] || fail "testcases in more than one shard: $dups"
if ! cmp -s "$tmp/unsharded.lst" "$tmp/merged.lst"; then
    diff "$tmp/unsharded.lst" "$tmp/merged.lst" | head -n 10
    fail "the merged testcases differ from the unsharded run's"
fi
n_cases=$(sed 's/.* name="\([^"/]*\).*/\1/' "$tmp/merged.lst" | sort -u | wc -l)
shard_names=$(grep -o '<testsuite name="ci shard [0-9]*/[0-9]* (impl ref)"' "$merged" | sed 's/.*shard \([0-9/]*\).*/\1/' | paste -sd ' ')
[ "$(tr ' ' '\n' <<<"$shard_names" | sort | paste -sd ' ')" = "$(seq -f "%g/$shards" 1 "$shards" | paste -sd ' ')" ] ||
    fail "merged report holds the shard suites '$shard_names', not 1/$shards..$shards/$shards once each"
# A case with several outputs has several testcases: all in one shard's suite.
split=$(awk '/<testsuite name=/ { suite = $0 }
    /<testcase / { c = $0; sub(/.* name="/, "", c); sub(/[\/"].*/, "", c)
                   if (c in where && where[c] != suite) print c; where[c] = suite }' "$merged" | sort -u | head -n 3)
[ -z "$split" ] || fail "cases split across shards: $split"
# Each shard's console summary, from its Slurm output file: they add up to the suite.
passed=0
for k in $(seq 0 $((shards - 1))); do
    grep -q "^shards.sbatch: .*: shard $((k + 1))/$shards of $suite\$" "$out/slurm-${jid}_$k.out" ||
        fail "task $k did not run shard $((k + 1))/$shards: $(head -n 1 "$out/slurm-${jid}_$k.out")"
    line=$(grep '^summary:' "$out/slurm-${jid}_$k.out") || fail "task $k printed no summary"
    p=$(sed -n 's/^summary: \([0-9]*\) passed, 0 failed, 0 skipped$/\1/p' <<<"$line")
    [ -n "$p" ] || fail "task $k: $line"
    passed=$((passed + p))
done
want_cases=$(sed -n 's/^summary: \([0-9]*\) passed.*/\1/p' "$tmp/unsharded.log")
if [ "$passed" != "$want_cases" ] || [ "$n_cases" != "$want_cases" ]; then
    fail "shards passed $passed cases ($n_cases in the merged report), the unsharded run $want_cases"
fi

note "PASS: $shards shards, $n_cases cases ($want) merged as the unsharded run; $((SECONDS - t0)) s in all"
