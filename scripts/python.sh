#!/usr/bin/env bash
# Builds and installs the Python package `arbor` (python/, PyO3 + maturin) into $REPO/.venv and
# runs its pytest suite (the arbor.ray tests on a local Ray cluster, scripts/ray.sh):
# `scripts/python.sh [pytest args...]`. The build uses cargo's dev
# profile and the workspace's target/ directory (MATURIN_PEP517_ARGS), so it reuses what
# `cargo test` compiled; `pip install ./python` alone builds a release wheel. Safe to run
# concurrently (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${REPO}/.arbor-test"
mkdir -p "${STATE}"
PY="$(bash "${REPO}/scripts/peer.sh")"

# maturin's PEP 517 hooks call the `maturin` binary of the venv.
export PATH="$(dirname "${PY}"):${PATH}"

exec 9>"${STATE}/python.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
if ! "${PY}" -c 'import maturin, pytest, pandas, polars' >/dev/null 2>&1; then
    echo "python.sh: installing maturin, pytest, pandas and polars into ${REPO}/.venv" >&2
    "${PY}" -m pip install --quiet 'maturin>=1.9.4,<2' pytest pandas polars >&2
fi
echo "python.sh: building and installing ./python (dev profile)" >&2
(cd "${REPO}" && MATURIN_PEP517_ARGS="--profile dev" "${PY}" -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./python >&2)
# The arbor.ray tests run on a local Ray cluster (a head and a worker node), started here unless
# ARBOR_TEST_RAY_ADDRESS names one, and stopped afterwards.
if [[ -z "${ARBOR_TEST_RAY_ADDRESS:-}" ]]; then
    trap 'bash "${REPO}/scripts/ray.sh" stop >/dev/null 2>&1 || true' EXIT
    eval "$(bash "${REPO}/scripts/ray.sh" | tail -1)"
fi
cd "${REPO}/python"
"${PY}" -m pytest -q tests "$@"
