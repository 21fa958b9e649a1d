#!/usr/bin/env bash
# Ensures the peer reader (hudi-rs through PyPI `hudi`, pinned to 0.5.0, with pyarrow) is
# installed in $REPO/.venv and prints the Python interpreter that runs scripts/peer_reader.py.
# Later hudi releases change semantics, so the pin is exact. Safe to run concurrently (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REPO}/.venv"
PY="${VENV}/bin/python"
STATE="${REPO}/.arbor-test"
mkdir -p "${STATE}"

exec 8>"${STATE}/peer.lock"
if command -v flock >/dev/null 2>&1; then
    flock 8
fi
if [[ ! -x "${PY}" ]]; then
    echo "peer.sh: creating ${VENV}" >&2
    python3 -m venv "${VENV}" >&2
fi
if ! "${PY}" -c 'import hudi, pyarrow, sys; sys.exit(0 if hudi.__version__ == "0.5.0" else 1)' >/dev/null 2>&1; then
    echo "peer.sh: installing hudi==0.5.0 and pyarrow into ${VENV}" >&2
    "${PY}" -m pip install --quiet 'hudi==0.5.0' pyarrow >&2
fi
echo "${PY}"
