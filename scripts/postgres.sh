#!/usr/bin/env bash
# Starts the local PostgreSQL the lock tests use and prints its connection string as the last line
# of stdout (everything else goes to stderr). Idempotent: safe to run again while it is running.
#
#   - installs PostgreSQL from Debian's packages if `pg_ctlcluster` is missing (needs root);
#   - creates cluster `<version> main` if there is none, and starts it;
#   - creates role `arbor` (password `arbor`) and database `arbor_test` owned by it if absent.
#
# Environment: PG_VERSION (default: 15 if installed, else the newest installed version).
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

as_postgres() {
    # Run from / so that the postgres user is not denied the caller's working directory.
    if command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
    fi
}

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        log "PostgreSQL is not installed and we are not root: cannot install it"
        exit 1
    fi
    log "installing PostgreSQL from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

if [ -z "${PG_VERSION:-}" ]; then
    if [ -d /usr/lib/postgresql/15 ]; then
        PG_VERSION=15
    else
        PG_VERSION="$(ls /usr/lib/postgresql | sort -n | tail -n 1)"
    fi
fi
if [ ! -x "/usr/lib/postgresql/${PG_VERSION}/bin/postgres" ]; then
    log "no PostgreSQL server binaries in /usr/lib/postgresql/${PG_VERSION}"
    exit 1
fi

# `pg_lsclusters -h` prints: version cluster port status owner data-directory log-file
cluster_field() {
    pg_lsclusters -h | awk -v v="$PG_VERSION" -v f="$1" '$1 == v && $2 == "main" { print $f }'
}

if [ -z "$(cluster_field 2)" ]; then
    log "creating cluster ${PG_VERSION} main"
    pg_createcluster "$PG_VERSION" main >&2
fi

if [ "$(cluster_field 4)" != "online" ]; then
    log "starting cluster ${PG_VERSION} main"
    pg_ctlcluster "$PG_VERSION" main start >&2
fi

PORT="$(cluster_field 3)"
for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "$PORT"; then
        break
    fi
    sleep 0.5
done
if ! pg_isready -q -h 127.0.0.1 -p "$PORT"; then
    log "PostgreSQL ${PG_VERSION} main did not become ready on 127.0.0.1:${PORT}"
    exit 1
fi

psql_admin() {
    as_postgres psql -p "$PORT" -v ON_ERROR_STOP=1 -qtAX "$@"
}

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'arbor'")" != "1" ]; then
    log "creating role arbor"
    psql_admin -c "CREATE ROLE arbor LOGIN PASSWORD 'arbor'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'arbor_test'")" != "1" ]; then
    log "creating database arbor_test"
    psql_admin -c "CREATE DATABASE arbor_test OWNER arbor" >&2
fi

echo "host=127.0.0.1 port=${PORT} user=arbor password=arbor dbname=arbor_test"
