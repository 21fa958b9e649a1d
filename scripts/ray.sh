#!/usr/bin/env bash
# Ensures a local Ray cluster (a head node and one worker node, two processes on 127.0.0.1) is
# running for the arbor.ray tests and prints `export ARBOR_TEST_RAY_ADDRESS=127.0.0.1:PORT` as the
# last line of stdout (everything else goes to stderr). Idempotent: safe to run again (and
# concurrently) while it is running.
#
#   scripts/ray.sh          install `ray[data]` into $REPO/.venv if missing, start the head and
#                           the worker if the head does not answer, print the address
#   scripts/ray.sh stop     stop the nodes this script started (`ray stop`)
#
# Port: $ARBOR_RAY_PORT (default 6390). CPUs per node: $ARBOR_RAY_CPUS (default 1). Logs and
# the lock: $REPO/.arbor-test/ray-PORT/.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${ARBOR_RAY_PORT:-6390}"
CPUS="${ARBOR_RAY_CPUS:-1}"
HOST=127.0.0.1
STATE="${REPO}/.arbor-test"
DIR="${STATE}/ray-${PORT}"
VENV="${REPO}/.venv"
PY="${VENV}/bin/python"
RAY="${VENV}/bin/ray"

mkdir -p "${DIR}"
log() { echo "ray.sh: $*" >&2; }

exec 9>"${DIR}/ray.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

if [[ "${1:-}" == "stop" ]]; then
    if [[ -x "${RAY}" ]]; then
        "${RAY}" stop >&2 || true
    fi
    exit 0
fi

if [[ ! -x "${PY}" ]]; then
    log "creating ${VENV}"
    python3 -m venv "${VENV}" >&2
fi
if ! "${PY}" -c 'import ray, ray.data' >/dev/null 2>&1; then
    log "installing ray[data] into ${VENV}"
    "${PY}" -m pip install --quiet 'ray[data]' >&2
fi

# True when a Ray cluster answers at the address with two live nodes (the port is probed first:
# `ray.init` on an address nobody listens at retries for a minute).
answering() {
    (exec 3<>"/dev/tcp/${HOST}/${PORT}") 2>/dev/null || return 1
    timeout 60 "${PY}" - "${HOST}:${PORT}" >/dev/null 2>&1 <<'EOF'
import sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
sys.exit(0 if sum(1 for n in ray.nodes() if n.get("Alive")) >= 2 else 1)
EOF
}

if ! answering; then
    "${RAY}" stop >&2 || true
    log "starting a head node on ${HOST}:${PORT} and a worker node (${CPUS} CPU each)"
    RAY_USAGE_STATS_ENABLED=0 "${RAY}" start --head --node-ip-address="${HOST}" --port="${PORT}" \
        --num-cpus="${CPUS}" --include-dashboard=false --disable-usage-stats \
        >"${DIR}/head.log" 2>&1 || { cat "${DIR}/head.log" >&2; exit 1; }
    RAY_USAGE_STATS_ENABLED=0 "${RAY}" start --address="${HOST}:${PORT}" --num-cpus="${CPUS}" \
        --disable-usage-stats >"${DIR}/worker.log" 2>&1 || { cat "${DIR}/worker.log" >&2; exit 1; }
    if ! answering; then
        log "the cluster at ${HOST}:${PORT} does not answer with two nodes (logs: ${DIR})"
        exit 1
    fi
fi
echo "export ARBOR_TEST_RAY_ADDRESS=${HOST}:${PORT}"
