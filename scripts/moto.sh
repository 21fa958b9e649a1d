#!/usr/bin/env bash
# Ensures a single-threaded moto S3 server is running for the S3 tests and prints its URL.
#
#   scripts/moto.sh          start moto if it is not answering yet, print http://127.0.0.1:PORT
#   scripts/moto.sh stop     stop the moto started by this script
#
# Port: $ARBOR_MOTO_PORT (default 5055). Python: a venv at $REPO/.venv (created if missing, with
# 'moto[server]>=5,<6' installed if moto is not importable). The pid and log files are in
# $REPO/.arbor-test/. Creates no bucket: the tests do. Safe to run concurrently (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${ARBOR_MOTO_PORT:-5055}"
HOST=127.0.0.1
URL="http://${HOST}:${PORT}"
STATE="${REPO}/.arbor-test"
VENV="${REPO}/.venv"
PIDFILE="${STATE}/moto-${PORT}.pid"
LOGFILE="${STATE}/moto-${PORT}.log"
PY="${VENV}/bin/python"

mkdir -p "${STATE}"

log() { echo "moto.sh: $*" >&2; }

# True if something answers HTTP on the port.
answering() {
    if command -v curl >/dev/null 2>&1; then
        curl -s -o /dev/null --max-time 2 "${URL}/" 
    else
        "${PY}" - "${URL}" <<'PY' 2>/dev/null
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1] + "/", timeout=2)
except urllib.error.HTTPError:
    pass
PY
    fi
}

# True if the moto API answers with a success status (curl -f: an HTTP error is a failure), i.e.
# the server on the port is moto, not merely something speaking HTTP.
is_moto_api() {
    if command -v curl >/dev/null 2>&1; then
        curl -sf -o /dev/null --max-time 2 "${URL}/moto-api/"
    else
        "${PY}" - "${URL}" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=2)
PY
    fi
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

# True if process $1 runs scripts/moto_server.py (so a pid reused by another program after moto
# died is never taken for moto, nor killed).
is_moto_pid() {
    local pid="$1" cmd=""
    if [[ -r "/proc/${pid}/cmdline" ]]; then
        cmd="$(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null || true)"
    elif command -v ps >/dev/null 2>&1; then
        cmd="$(ps -p "${pid}" -o command= 2>/dev/null || true)"
    fi
    [[ "${cmd}" == *moto_server.py* ]]
}

# The pid of the moto started by this script, if it is still running.
running_pid() {
    local pid
    if pid="$(pidfile_pid)" && is_moto_pid "${pid}"; then
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
        if kill -0 "${pid}" 2>/dev/null && is_moto_pid "${pid}"; then
            kill -9 "${pid}" 2>/dev/null || true
        fi
        log "stopped moto (pid ${pid})"
    elif pid="$(pidfile_pid)"; then
        log "pid ${pid} in ${PIDFILE} is not moto_server.py (moto died and the pid was reused); not killing it"
    else
        log "no moto started by this script is running on port ${PORT}"
    fi
    rm -f "${PIDFILE}"
}

ensure_venv() {
    if [[ ! -x "${PY}" ]]; then
        log "creating ${VENV}"
        python3 -m venv "${VENV}" >&2
    fi
    if ! "${PY}" -c 'import moto, werkzeug, flask, flask_cors' >/dev/null 2>&1; then
        log "installing moto[server] into ${VENV}"
        "${PY}" -m pip install --quiet 'moto[server]>=5,<6' >&2
    fi
}

start() {
    if running_pid >/dev/null && answering; then
        echo "${URL}"
        return 0
    fi
    if answering; then
        # Something else serves the port (e.g. a moto started by hand). Use it only if it is moto.
        if is_moto_api; then
            log "using the moto already answering on ${URL} (not started by this script; make sure it is single-threaded)"
            echo "${URL}"
            return 0
        fi
        log "port ${PORT} is taken by something that is not moto; set ARBOR_MOTO_PORT"
        return 1
    fi
    ensure_venv
    log "starting moto on ${URL} (log: ${LOGFILE})"
    # 9>&-: the server must not inherit the lock file descriptor, or it would hold the lock
    # for its whole life and every later invocation would wait forever.
    nohup "${PY}" "${REPO}/scripts/moto_server.py" --host "${HOST}" --port "${PORT}" \
        >"${LOGFILE}" 2>&1 </dev/null 9>&- &
    echo $! >"${PIDFILE}"
    for _ in $(seq 1 150); do
        if answering; then
            echo "${URL}"
            return 0
        fi
        # Liveness only: right after the fork the child may not have exec'd python yet.
        if ! pidfile_pid >/dev/null; then
            log "moto exited during startup; last lines of ${LOGFILE}:"
            tail -n 20 "${LOGFILE}" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    log "moto did not answer on ${URL} within 30 s; see ${LOGFILE}"
    return 1
}

main() {
    local cmd="${1:-start}"
    # Serialise concurrent invocations (parallel test binaries).
    exec 9>"${STATE}/moto-${PORT}.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    case "${cmd}" in
        start) start ;;
        stop) stop ;;
        *)
            log "usage: $0 [start|stop]"
            return 2
            ;;
    esac
}

main "$@"
