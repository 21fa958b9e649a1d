#!/usr/bin/env bash
# Prints the path of libeatmydata.so as the last line of stdout (everything else goes to stderr),
# installing Debian's `eatmydata` package first if the library is missing (needs root and
# apt-get). Exits 1, printing nothing on stdout, when the library cannot be had.
#
# `cargo xtask test` preloads it (LD_PRELOAD) into the test binaries: fsync and friends become
# no-ops. The tests never simulate a power loss (crashes are injected by the fault-injecting
# storage, above the file system), and the syncs arbor's local storage does on every write and
# rename were a quarter of the test binaries' time (arbor-branching's tests: 417 s, 310 s
# preloaded, alone on 2 cores).
set -euo pipefail

log() { echo "eatmydata.sh: $*" >&2; }

find_lib() {
    local d
    for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
        if [ -f "$d/libeatmydata.so" ]; then
            echo "$d/libeatmydata.so"
            return 0
        fi
    done
    return 1
}

if lib="$(find_lib)"; then
    echo "$lib"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "libeatmydata.so is not installed and cannot be installed here (needs root and apt-get)"
    exit 1
fi
log "installing eatmydata from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq eatmydata >&2; then
    apt-get update -qq >&2
    apt-get install -y -qq eatmydata >&2
fi
if lib="$(find_lib)"; then
    echo "$lib"
    exit 0
fi
log "installed eatmydata, but found no libeatmydata.so"
exit 1
