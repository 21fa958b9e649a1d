#!/usr/bin/env python3
"""The Spark stage of `cargo xtask interop` (issue 34): arbor's tables read, written and managed
by Apache Spark 3.5 with one Hudi Spark bundle, and what Spark writes managed by arbor, in ONE
local[2] SparkSession for every scenario of that Hudi version.

  PY=$(bash scripts/spark.sh | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["python"])')
  $PY scripts/spark_stage.py --hudi-version 1.1.1 --arbor target/debug/arbor [--scenarios reads,writes|all]
                             [--workdir DIR]

Scenarios are the modules scripts/spark_stage_<name>.py (each a `run(stage)`): by default (and
with `all`) every one of SCENARIOS, each with its CI share of its matrix on this version;
ARBOR_SPARK_FULL=1 widens each to its whole matrix. Output: one JSON line per check on stdout ({"id", "hudi", "ok", "seconds",
"detail" or "error"}); then a last line {"summary": {"hudi", "passed", "failed", "seconds",
"session_start_seconds", "workdir"}}. Spark's logs go to stderr. Exit status 0 when the stage
ran (failed checks included: the caller counts them), 2 when Spark could not start.
"""

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import spark_peer  # noqa: E402
from canonical_rows import dumps  # noqa: E402
from spark_stage_lib import Arbor, Stage, error_text  # noqa: E402

SCENARIOS = ["reads", "writes", "protect", "shapes", "concurrent", "cluster"]

# CI runs every scenario on every Hudi version, each scenario with its CI share of its own
# matrix there (spark_stage_lib.CI_TABLE_TYPES, spark_stage_shapes.CI_SHAPES: one table type
# per version, taking turns; a third of the shapes per version); each version in its own
# session, side by side. ARBOR_SPARK_FULL=1 (or `--scenarios all`) widens every scenario to
# its whole matrix on every version.

OUT = None


def emit(doc):
    OUT.write(dumps(doc) + "\n")
    OUT.flush()


def main(argv):
    global OUT
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hudi-version", required=True)
    p.add_argument("--arbor", default=os.path.join(REPO, "target", "debug", "arbor"))
    p.add_argument("--scenarios", default=None)
    p.add_argument("--workdir")
    p.add_argument("--driver-memory", default="1g")
    p.add_argument("--log-level", default="ERROR")
    args = p.parse_args(argv[1:])
    args.shuffle_partitions = 2
    args.jars_json = None

    OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spark_peer.OUT = OUT

    work = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix=f"arbor-spark-{args.hudi_version}-")
    os.makedirs(work, exist_ok=True)
    bundle, utilities = spark_peer.jars_for(args.hudi_version, None)
    session_dir = tempfile.mkdtemp(prefix="arbor-spark-session-")
    t0 = time.monotonic()
    try:
        spark = spark_peer.start_session(args, bundle, utilities, session_dir)
        spark.range(1).count()
    except Exception as e:
        emit({"id": "session", "hudi": args.hudi_version, "ok": False, "error": error_text(e)})
        emit({"summary": {"hudi": args.hudi_version, "passed": 0, "failed": 1, "session": False}})
        return 2
    started = time.monotonic() - t0
    print(f"spark_stage: Spark {spark.version} with Hudi {args.hudi_version} started in {started:.1f}s; tables under {work}",
          file=sys.stderr, flush=True)
    peer = spark_peer.Peer(spark, args, bundle, utilities, started)
    stage = Stage(peer, Arbor(os.path.abspath(args.arbor), work), args.hudi_version, work, emit)
    if args.scenarios in (None, "", "all"):
        names = SCENARIOS
    else:
        names = [s for s in args.scenarios.split(",") if s]
    for name in names:
        stage.scenario = name
        t = time.monotonic()
        try:
            module = importlib.import_module(f"spark_stage_{name}")
            module.run(stage)
        except Exception as e:  # a scenario that cannot go on is one failure
            stage.check("crashed", lambda e=e: (_ for _ in ()).throw(e))
        print(f"spark_stage: {args.hudi_version} {name}: {time.monotonic() - t:.1f}s", file=sys.stderr, flush=True)
    seconds = round(time.monotonic() - t0, 1)
    emit({"summary": {"hudi": args.hudi_version, "passed": stage.passed, "failed": stage.failed,
                      "seconds": seconds, "session_start_seconds": round(started, 1), "workdir": work}})
    spark.stop()
    shutil.rmtree(session_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
