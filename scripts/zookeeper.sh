#!/usr/bin/env bash
# Ensures a standalone ZooKeeper server is running on 127.0.0.1 for the ZooKeeper lock tests and
# prints `export ARBOR_TEST_ZK_URL=zk://127.0.0.1:PORT` as the last line of stdout (everything else
# goes to stderr). Idempotent: safe to run again (and concurrently) while it is running.
#
#   scripts/zookeeper.sh          install Debian's `zookeeper` package if missing (apt-get, needs
#                                 root), start the server if it is not answering, print the URL
#   scripts/zookeeper.sh stop     stop the server started by this script
#
# Port: $ARBOR_ZK_PORT (default 2181). Data, config, pid and log files: $REPO/.arbor-test/zookeeper-PORT/.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${ARBOR_ZK_PORT:-2181}"
HOST=127.0.0.1
STATE="${REPO}/.arbor-test"
DIR="${STATE}/zookeeper-${PORT}"
PIDFILE="${DIR}/zookeeper.pid"
LOGFILE="${DIR}/zookeeper.log"
JAR=/usr/share/java/zookeeper.jar
MAIN=org.apache.zookeeper.server.ZooKeeperServerMain

mkdir -p "${DIR}/data"

log() { echo "zookeeper.sh: $*" >&2; }

# True if a ZooKeeper answers `ruok` with `imok` on the port.
answering() {
    local reply
    # In a subshell: a refused connection must not print bash's own error messages.
    reply="$( (exec 3<>"/dev/tcp/${HOST}/${PORT}" && printf 'ruok' >&3 && timeout 2 cat <&3) \
        2>/dev/null || true)"
    [[ "${reply}" == imok* ]]
}

# The live pid recorded in the pidfile, if it runs ZooKeeper's server main class.
running_pid() {
    local pid cmd=""
    [[ -f "${PIDFILE}" ]] || return 1
    pid="$(cat "${PIDFILE}")"
    [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null || return 1
    if [[ -r "/proc/${pid}/cmdline" ]]; then
        cmd="$(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null || true)"
    fi
    [[ "${cmd}" == *"${MAIN}"* ]] || return 1
    echo "${pid}"
}

ensure_installed() {
    if [[ -r "${JAR}" ]] && command -v java >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        log "ZooKeeper is not installed and we are not root: cannot install it"
        return 1
    fi
    log "installing ZooKeeper from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq zookeeper >&2
    [[ -r "${JAR}" ]] || { log "${JAR} missing after installing zookeeper"; return 1; }
}

print_url() { echo "export ARBOR_TEST_ZK_URL=zk://${HOST}:${PORT}"; }

start() {
    if answering; then
        running_pid >/dev/null || log "using the ZooKeeper already answering on ${HOST}:${PORT}"
        print_url
        return 0
    fi
    ensure_installed
    cat >"${DIR}/zoo.cfg" <<CFG
tickTime=1000
dataDir=${DIR}/data
clientPort=${PORT}
clientPortAddress=${HOST}
maxClientCnxns=200
minSessionTimeout=2000
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
CFG
    log "starting ZooKeeper on ${HOST}:${PORT} (log: ${LOGFILE})"
    # 9>&-: the server must not inherit the lock file descriptor.
    nohup java -Xmx256m -cp "/etc/zookeeper/conf:${JAR}" \
        -Dzookeeper.log.dir="${DIR}" -Dzookeeper.root.logger=INFO,CONSOLE \
        "${MAIN}" "${DIR}/zoo.cfg" >"${LOGFILE}" 2>&1 </dev/null 9>&- &
    echo $! >"${PIDFILE}"
    for _ in $(seq 1 150); do
        if answering; then
            print_url
            return 0
        fi
        if ! kill -0 "$(cat "${PIDFILE}")" 2>/dev/null; then
            log "ZooKeeper exited during startup; last lines of ${LOGFILE}:"
            tail -n 20 "${LOGFILE}" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    log "ZooKeeper did not answer on ${HOST}:${PORT} within 30 s; see ${LOGFILE}"
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
        log "stopped ZooKeeper (pid ${pid})"
    else
        log "no ZooKeeper started by this script is running on port ${PORT}"
    fi
    rm -f "${PIDFILE}"
}

main() {
    local cmd="${1:-start}"
    exec 9>"${DIR}.lock"
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
