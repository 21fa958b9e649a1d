#!/usr/bin/env bash
# The protobuf compiler for the build scripts of the lance crates (lance-encoding, lance-file
# compile their .proto files with prost-build, which runs $PROTOC). .cargo/config.toml points
# PROTOC here unless the environment sets it. Uses, in order: a `protoc` on PATH; Debian's
# protobuf-compiler, installed with apt-get when running as root; the protoc of PyPI's
# grpcio-tools, installed into .arbor-test/protoc-venv. Passes its arguments through.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
log() { echo "scripts/protoc.sh: $*" >&2; }

if command -v protoc >/dev/null 2>&1; then
    exec protoc "$@"
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    # One install at a time: cargo runs several build scripts at once.
    exec 9>"${TMPDIR:-/tmp}/arbor-protoc.lock"
    flock 9
    if ! command -v protoc >/dev/null 2>&1; then
        log "installing protobuf-compiler (apt-get)"
        if ! apt-get install -y -qq protobuf-compiler >&2; then
            apt-get update -qq >&2 && apt-get install -y -qq protobuf-compiler >&2 || true
        fi
    fi
    flock -u 9
    if command -v protoc >/dev/null 2>&1; then
        exec protoc "$@"
    fi
fi
venv="$root/.arbor-test/protoc-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc_tools" 2>/dev/null; then
    exec 9>"${TMPDIR:-/tmp}/arbor-protoc.lock"
    flock 9
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc_tools" 2>/dev/null; then
        log "installing grpcio-tools (PyPI) into $venv for its protoc"
        python3 -m venv "$venv" >&2
        "$venv/bin/python" -m pip install -q grpcio-tools >&2
    fi
    flock -u 9
fi
exec "$venv/bin/python" -m grpc_tools.protoc "$@"
