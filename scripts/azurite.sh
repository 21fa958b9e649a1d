#!/usr/bin/env bash
# Ensures an Azurite (Azure Blob Storage emulator) blob service is running for the Azure tests
# and prints its URL.
#
#   scripts/azurite.sh          start Azurite if it is not answering yet, print http://127.0.0.1:PORT
#   scripts/azurite.sh stop     stop the Azurite started by this script
#   scripts/azurite.sh container NAME
#                               start Azurite if needed, create container NAME (an existing
#                               one is fine) with a SharedKey-signed request, print the URL
#
# Port: $ARBOR_AZURITE_PORT (default 10000, the emulator's standard blob port; object_store's
# emulator mode reads any other address from AZURITE_BLOB_STORAGE_URL). The npm package
# 'azurite' is installed under $REPO/.arbor-test/azurite/ when missing (needs node and npm).
# Data, pid and log files are in $REPO/.arbor-test/. Account: devstoreaccount1 with the
# well-known key. Creates a container only when asked. Safe to run concurrently (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${ARBOR_AZURITE_PORT:-10000}"
HOST=127.0.0.1
URL="http://${HOST}:${PORT}"
STATE="${REPO}/.arbor-test"
PREFIX="${STATE}/azurite"
BIN="${PREFIX}/node_modules/.bin/azurite-blob"
DATA="${STATE}/azurite-${PORT}-data"
PIDFILE="${STATE}/azurite-${PORT}.pid"
LOGFILE="${STATE}/azurite-${PORT}.log"

mkdir -p "${STATE}"

log() { echo "azurite.sh: $*" >&2; }

# True if something answers HTTP on the port.
answering() {
    curl -s -o /dev/null --max-time 2 "${URL}/"
}

# True if the server on the port says it is Azurite (its responses carry `Server: Azurite-...`).
is_azurite_api() {
    curl -s -D - -o /dev/null --max-time 2 "${URL}/devstoreaccount1?comp=list" 2>/dev/null \
        | grep -qi '^server: *azurite'
}

# The live pid recorded in the pidfile (whatever process it now is).
pidfile_pid() {
    if [[ -f "${PIDFILE}" ]]; then
        local pid
        pid="$(cat "${PIDFILE}")"
        if [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null; then
            echo "${pid}"
            return 0
        fi
    fi
    return 1
}

# True if process $1 runs azurite (a pid reused by another program is never taken for it).
is_azurite_pid() {
    local pid="$1" cmd=""
    if [[ -r "/proc/${pid}/cmdline" ]]; then
        cmd="$(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null || true)"
    elif command -v ps >/dev/null 2>&1; then
        cmd="$(ps -p "${pid}" -o command= 2>/dev/null || true)"
    fi
    [[ "${cmd}" == *azurite* ]]
}

# The pid of the Azurite started by this script, if it is still running.
running_pid() {
    local pid
    if pid="$(pidfile_pid)" && is_azurite_pid "${pid}"; then
        echo "${pid}"
        return 0
    fi
    return 1
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill "${pid}" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "${pid}" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "${pid}" 2>/dev/null && is_azurite_pid "${pid}"; then
            kill -9 "${pid}" 2>/dev/null || true
        fi
        log "stopped Azurite (pid ${pid})"
    elif pid="$(pidfile_pid)"; then
        log "pid ${pid} in ${PIDFILE} is not azurite (it died and the pid was reused); not killing it"
    else
        log "no Azurite started by this script is running on port ${PORT}"
    fi
    rm -f "${PIDFILE}"
}

ensure_installed() {
    if [[ ! -x "${BIN}" ]]; then
        if ! command -v npm >/dev/null 2>&1; then
            log "npm is not installed: cannot install azurite"
            return 1
        fi
        log "installing the npm package azurite into ${PREFIX}"
        mkdir -p "${PREFIX}"
        npm install --prefix "${PREFIX}" --no-audit --no-fund --silent azurite >&2
    fi
}

start() {
    if running_pid >/dev/null && answering; then
        echo "${URL}"
        return 0
    fi
    if answering; then
        # Something else serves the port (e.g. an Azurite started by hand). Use it only if it is
        # Azurite.
        if is_azurite_api; then
            log "using the Azurite already answering on ${URL} (not started by this script)"
            echo "${URL}"
            return 0
        fi
        log "port ${PORT} is taken by something that is not Azurite; set ARBOR_AZURITE_PORT"
        return 1
    fi
    ensure_installed
    mkdir -p "${DATA}"
    log "starting Azurite blob service on ${URL} (log: ${LOGFILE})"
    # 9>&-: the server must not inherit the lock file descriptor (see moto.sh).
    # --skipApiVersionCheck: object_store may speak a newer REST API version than this Azurite.
    nohup "${BIN}" --blobHost "${HOST}" --blobPort "${PORT}" --location "${DATA}" \
        --skipApiVersionCheck --loose >"${LOGFILE}" 2>&1 </dev/null 9>&- &
    echo $! >"${PIDFILE}"
    for _ in $(seq 1 150); do
        if answering; then
            echo "${URL}"
            return 0
        fi
        if ! pidfile_pid >/dev/null; then
            log "Azurite exited during startup; last lines of ${LOGFILE}:"
            tail -n 20 "${LOGFILE}" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    log "Azurite did not answer on ${URL} within 30 s; see ${LOGFILE}"
    return 1
}

ACCOUNT=devstoreaccount1
# The emulator's well-known key (public, documented by Microsoft).
ACCOUNT_KEY="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

# Creates container $1 in the emulator's account (201 created, 409 already there).
create_container() {
    local name="$1" date version sts hexkey sig code
    if [[ ! "${name}" =~ ^[a-z0-9]([a-z0-9-]{1,61}[a-z0-9])?$ ]]; then
        log "invalid container name ${name:-<empty>}"
        return 2
    fi
    date="$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')"
    version=2021-08-06
    sts="PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:${date}\nx-ms-version:${version}\n/${ACCOUNT}/${ACCOUNT}/${name}\nrestype:container"
    hexkey="$(printf '%s' "${ACCOUNT_KEY}" | base64 -d | od -An -tx1 | tr -d ' \n')"
    sig="$(printf '%b' "${sts}" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:${hexkey}" -binary | base64 -w0)"
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X PUT \
        "${URL}/${ACCOUNT}/${name}?restype=container" \
        -H "x-ms-date: ${date}" -H "x-ms-version: ${version}" -H "Content-Length: 0" \
        -H "Authorization: SharedKey ${ACCOUNT}:${sig}")"
    case "${code}" in
        201 | 409) return 0 ;;
        *)
            log "creating container ${name} failed with HTTP ${code}"
            return 1
            ;;
    esac
}

main() {
    local cmd="${1:-start}"
    exec 9>"${STATE}/azurite-${PORT}.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    case "${cmd}" in
        start) start ;;
        stop) stop ;;
        container)
            start >/dev/null
            create_container "${2:-}"
            echo "${URL}"
            ;;
        *)
            log "usage: $0 [start|stop|container NAME]"
            return 2
            ;;
    esac
}

main "$@"
