#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL server: initdb into a new temporary folder, start it on a
# private port (127.0.0.1) and socket folder, export TPRIMAT_TEST_POSTGRES_URL (a superuser with a random
# password), run the command, then stop the server and delete the folder, however the command ends.
# The history tests (tests/unit/evaluate/history/) run against it as well as against SQLite. Needs the Debian
# postgresql package (initdb, pg_ctl); as root the server runs as the postgres user (postgres refuses root).
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/postgres_throwaway.sh COMMAND [ARGS...]
Starts a temporary PostgreSQL cluster (initdb in a temp folder, private port and socket), runs COMMAND
with TPRIMAT_TEST_POSTGRES_URL=postgresql+psycopg://tprimat:PASSWORD@127.0.0.1:PORT/postgres exported,
then stops the cluster and removes the folder. Exit status: COMMAND's; 2 when PostgreSQL is missing.
Example (what .ci/run does): shell/postgres_throwaway.sh ./shell/test.sh
USAGE
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    -*) shown="${1:0:40}"; echo "postgres_throwaway: unknown argument ${shown@Q}" >&2; usage >&2; exit 2 ;;
esac

bin=""
for candidate in /usr/lib/postgresql/*/bin; do
    [[ -x "$candidate/initdb" ]] && bin="$candidate"
done
if [[ -z "$bin" ]]; then
    echo "postgres_throwaway: no PostgreSQL server found (install the postgresql package)" >&2
    exit 2
fi

as_server() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# As root the server runs as postgres, which must reach the folder: /tmp, whatever TMPDIR says.
parent="${TMPDIR:-/tmp}"
[[ $EUID -ne 0 ]] || parent=/tmp
folder="$(mktemp -d "$parent/tprimat-pg.XXXXXX")"
chmod 700 "$folder"
[[ $EUID -ne 0 ]] || chown postgres: "$folder"
# shellcheck disable=SC2329  # called by the EXIT trap
stop() {
    as_server "$bin/pg_ctl" -D "$folder/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$folder"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
printf '%s\n' "$password" > "$folder/pwfile"
[[ $EUID -ne 0 ]] || chown postgres: "$folder/pwfile"
as_server "$bin/initdb" -D "$folder/data" -U tprimat --pwfile="$folder/pwfile" -A scram-sha-256 \
    --no-sync >"$folder/initdb.log" 2>&1 || { echo "postgres_throwaway: initdb failed:" >&2; tail -5 "$folder/initdb.log" >&2; exit 2; }
rm -f "$folder/pwfile"
mkdir -p "$folder/socket"
[[ $EUID -ne 0 ]] || chown postgres: "$folder/socket"
as_server "$bin/pg_ctl" -D "$folder/data" -l "$folder/server.log" -w -t 60 \
    -o "-p $port -k $folder/socket -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null \
    || { echo "postgres_throwaway: the server did not start:" >&2; tail -5 "$folder/server.log" >&2; exit 2; }
echo "postgres_throwaway: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (removed afterwards)"
export TPRIMAT_TEST_POSTGRES_URL="postgresql+psycopg://tprimat:$password@127.0.0.1:$port/postgres"
set +e
"$@"
code=$?
set -e
exit "$code"
