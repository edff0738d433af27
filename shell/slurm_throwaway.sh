#!/usr/bin/env bash
# Run a command against a throwaway two-node Slurm cluster on this host, as shell/postgres_throwaway.sh does for
# PostgreSQL: slurm.conf, cgroup.conf and a munge key in a new temporary folder; munged, slurmctld and two slurmd
# (nodes n1 and n2, `slurmd -N`) with every state, spool, log, PID file and socket in that folder; free ports;
# wait until sinfo shows both nodes idle; run the command with SLURM_CONF exported; then cancel what is left of
# its jobs, stop each daemon by its own PID and delete the folder, however the command ends.
# The nodes' NodeAddr is 127.0.0.1 (NodeHostname this host), so nothing needs a name in /etc/hosts:
# shell/slurm.sbatch takes MASTER_ADDR from the first node's NodeAddr.
# Needs Debian's slurmctld, slurmd, slurm-client and munge packages (.ci/run installs them) and root, as slurmd
# does to start a job step. tests/e2e/test_slurm_cluster.py runs shell/slurm.sbatch under it.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/slurm_throwaway.sh COMMAND [ARGS...]
Starts munged, slurmctld and two slurmd (nodes n1, n2, both this host at 127.0.0.1) from a temporary
folder, waits until both nodes are idle, runs COMMAND with SLURM_CONF exported (sbatch, srun, sinfo,
scancel then talk to this cluster), then cancels its jobs, stops the daemons and removes the folder.
Ports: 26817 (slurmctld), 26818 and 26819 (the two slurmd), or the next free ones.
Exit status: COMMAND's; 2 with one line naming the daemon that failed and why (or what is missing).
Example: shell/slurm_throwaway.sh sbatch --wait --nodes=2 shell/slurm.sbatch data
USAGE
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    -*) shown="${1:0:40}"; echo "slurm_throwaway: unknown argument ${shown@Q}" >&2; usage >&2; exit 2 ;;
esac

fail() {
    echo "slurm_throwaway: $*" >&2
    exit 2
}

for tool in munged slurmctld slurmd sinfo squeue scancel; do
    command -v "$tool" >/dev/null \
        || fail "no $tool on PATH (install the Debian packages slurmctld slurmd slurm-client munge)"
done
[[ $EUID -eq 0 ]] || fail "slurmd must run as root to start job steps (run as root, as .ci/run does)"

folder="$(mktemp -d /tmp/tprimat-slurm.XXXXXX)"
chmod 700 "$folder"
pids=()     # every daemon this script started, in start order
names=()    # what each is called in a message

# shellcheck disable=SC2329  # called by the EXIT trap
stop() {
    local i deadline
    if [[ -f "$folder/slurm.conf" ]] && kill -0 "${pids[1]:-0}" 2>/dev/null; then
        # Jobs still running would leave their slurmstepd behind the daemons: cancel them, wait for the steps.
        SLURM_CONF="$folder/slurm.conf" scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
        deadline=$((SECONDS + 30))
        while [[ $SECONDS -lt $deadline ]] && compgen -G "$folder/spool-n?/n?_*" >/dev/null; do
            sleep 0.2
        done
    fi
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -TERM "${pids[i]}" 2>/dev/null || true
    done
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        deadline=$((SECONDS + 10))
        while kill -0 "${pids[i]}" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do
            sleep 0.1
        done
        kill -KILL "${pids[i]}" 2>/dev/null || true
        wait "${pids[i]}" 2>/dev/null || true
    done
    rm -rf "$folder"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A port nothing listens on, from $1 upwards, and not one already taken here.
taken=" "
free_port() {
    local port
    for ((port = $1; port < $1 + 200; port++)); do
        [[ "$taken" == *" $port "* ]] && continue
        if ! (: <>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            taken+="$port "
            echo "$port"
            return 0
        fi
    done
    fail "no free port in $1-$(($1 + 199))"
}
ctld_port="$(free_port 26817)"; taken+="$ctld_port "
n1_port="$(free_port 26818)"; taken+="$n1_port "
n2_port="$(free_port 26819)"

host="$(hostname -s)"
user="$(id -un)"
cpus="$(nproc)"
mkdir -p "$folder/munge" "$folder/ctld" "$folder/spool-n1" "$folder/spool-n2"
dd if=/dev/urandom of="$folder/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$folder/munge/munge.key"
: >"$folder/plugstack.conf"
cat >"$folder/cgroup.conf" <<EOF
# Slurm 22.05 has no CgroupPlugin=disabled; autodetect without systemd works in a container.
CgroupPlugin=autodetect
IgnoreSystemd=yes
EOF
cat >"$folder/slurm.conf" <<EOF
# A throwaway cluster (shell/slurm_throwaway.sh): two nodes on one host, everything under $folder.
ClusterName=tprimat
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$folder/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$folder/ctld
SlurmdSpoolDir=$folder/spool-%n
SlurmctldPidFile=$folder/slurmctld.pid
SlurmdPidFile=$folder/slurmd-%n.pid
SlurmctldLogFile=$folder/slurmctld.log
SlurmdLogFile=$folder/slurmd-%n.log
PlugStackConfig=$folder/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=30
# sbatch --wait polls after 2 s, then 8 and 32 s while they are below MinJobAge (the default 300 s made a 10 s job
# take 42 s); 2 keeps it polling every 2 s (a finished job's record still stays until slurmctld's next purge).
MinJobAge=2
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n1_port CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n2_port CPUs=$cpus State=UNKNOWN
PartitionName=tprimat Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$folder/slurm.conf"

# The last error its log holds, on one line (bounded): what a daemon that exited says about why.
last_error() {
    local line
    line="$(grep -aiE 'error|fatal' "$1" 2>/dev/null | tail -n 1 || true)"
    [[ -n "$line" ]] || line="$(tail -n 1 "$1" 2>/dev/null || true)"
    printf '%s' "${line:0:300}" | tr -d '\r' | tr '\n\t' '  '
}

# start NAME LOG COMMAND...: a daemon in the foreground of a background job, so that its PID is this script's.
start() {
    local name="$1" log="$2"
    shift 2
    "$@" >>"$log" 2>&1 </dev/null &
    pids+=("$!")
    names+=("$name")
}

# Every daemon still alive, or one line naming the first that exited and why.
check_alive() {
    local i
    for i in "${!pids[@]}"; do
        kill -0 "${pids[i]}" 2>/dev/null && continue
        fail "${names[i]} exited during start-up: $(last_error "$folder/${names[i]// /-}.log")"
    done
}

start munged "$folder/munged.log" munged --foreground --force --key-file="$folder/munge/munge.key" \
    --socket="$folder/munge/munge.socket" --pid-file="$folder/munge/munged.pid" \
    --seed-file="$folder/munge/munged.seed" --log-file="$folder/munged.log"
deadline=$((SECONDS + 20))
until [[ -S "$folder/munge/munge.socket" ]]; do
    check_alive
    [[ $SECONDS -lt $deadline ]] || fail "munged did not create its socket within 20 s: $(last_error "$folder/munged.log")"
    sleep 0.1
done
start slurmctld "$folder/slurmctld.log" slurmctld -D -f "$SLURM_CONF"
start "slurmd n1" "$folder/slurmd-n1.log" slurmd -D -N n1 -f "$SLURM_CONF"
start "slurmd n2" "$folder/slurmd-n2.log" slurmd -D -N n2 -f "$SLURM_CONF"

# Both nodes idle within 60 s, or one line with what sinfo shows instead (a node's state and reason).
deadline=$((SECONDS + 60))
until [[ "$(sinfo --noheader --Node --format='%N %t' 2>/dev/null | sort | tr '\n' ' ')" == "n1 idle n2 idle " ]]; do
    check_alive
    if [[ $SECONDS -ge $deadline ]]; then
        fail "the nodes are not idle after 60 s: sinfo says $(sinfo --noheader --Node --format='%N %t %E' 2>&1 \
            | tr '\n' ' ' | cut -c1-200)(slurmctld: $(last_error "$folder/slurmctld.log"))"
    fi
    sleep 0.2
done
echo "slurm_throwaway: $(sinfo --version) on $host: nodes n1, n2 idle (slurmctld on 127.0.0.1:$ctld_port," \
    "slurmd on $n1_port and $n2_port; $folder removed afterwards)"
set +e
"$@"
code=$?
set -e
exit "$code"
