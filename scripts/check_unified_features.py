#!/usr/bin/env python3
"""Checks that the binaries `cargo xtask test` builds on their own reuse the test build.

`cargo xtask test` first builds xtask alone (`cargo run -p xtask`), later `cargo test
--workspace`, then `cargo build -p arbor-cli` (the interop stages) and the Python extension
(`-p arbor-python`, through maturin). Cargo resolves features per build, so a dependency whose
features differ between these builds is compiled twice, and so is everything above it (parquet,
DataFusion, every arbor crate: 7 to 12 minutes each on 2 cores). crates/workspace-hack lines them
up. This script compares cargo's unit graphs (`--unit-graph`, through RUSTC_BOOTSTRAP=1): every
library unit of each build alone whose package the test build also compiles must be one of the
test build's units, with the same features and settings. Prints what drifted and exits 1.
Usage: scripts/check_unified_features.py [PACKAGE ...] (default: xtask arbor-cli arbor-python).
"""

import json
import os
import subprocess
import sys

LIB_KINDS = {"lib", "rlib", "proc-macro"}


def units(args):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    cmd = ["cargo", *args, "--unit-graph", "-Z", "unstable-options"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"check_unified_features: {' '.join(cmd)} failed: {out.stderr[-2000:]}")
    found = {}
    for u in json.loads(out.stdout)["units"]:
        if u["mode"] != "build" or not LIB_KINDS & set(u["target"]["kind"]):
            continue
        # The profile's name (dev or test) does not change what is compiled; its settings do.
        profile = {k: v for k, v in u["profile"].items() if k != "name"}
        key = (u["pkg_id"], u["target"]["name"])
        variant = (tuple(sorted(u["features"])), json.dumps(profile, sort_keys=True), u.get("platform"))
        found.setdefault(key, set()).add(variant)
    return found


def main():
    packages = sys.argv[1:] or ["xtask", "arbor-cli", "arbor-python"]
    workspace = units(["test", "--workspace", "--no-run"])
    drifted = 0
    for p in packages:
        alone = units(["build", "-p", p])
        for key, variants in sorted(alone.items()):
            if key not in workspace or variants <= workspace[key]:
                continue
            drifted += 1
            name = key[0].split("#")[-1]
            theirs = sorted({f for v in workspace[key] for f in v[0]})
            for features, profile, _ in variants - workspace[key]:
                missing = sorted(set(theirs) - set(features))
                extra = sorted(set(features) - set(theirs))
                print(
                    f"check_unified_features: `cargo build -p {p}` compiles {name} again: "
                    f"features lacking {missing}, extra {extra}"
                    + ("" if missing or extra else f", settings {profile}")
                )
    if drifted:
        print("check_unified_features: add the lacking features to crates/workspace-hack/Cargo.toml")
        sys.exit(1)
    print(f"check_unified_features: {', '.join(packages)} built alone reuse the test build's units")


if __name__ == "__main__":
    main()
