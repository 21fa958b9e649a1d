# The hudi-rs side of `cargo xtask bench sql`: the same query through hudi-rs's DataFusion
# provider (PyPI `hudi` 0.5.0, `HudiDataFusionDataSource`, in datafusion-python 54), inside one
# Python process so that interpreter start-up and imports are not counted. Run by the example
# bench_pruning as
#   python -c "$(cat bench_pruning_hudi_rs.py)" TABLE_DIR QUERY RUNS
# Each run: a fresh SessionContext, the provider registered as `t` (timeline and file listing),
# the query planned and executed. The query must return one row of two integers (n, s).
# Prints one JSON line:
#   {"hudi": version, "datafusion": version, "seconds": [per run], "answer": [n, s],
#    "plan": the EXPLAIN ANALYZE line of the scan, "peak_kib": the process's peak resident set}
import json
import sys
import time

import datafusion
import hudi
from datafusion import SessionContext
from hudi import HudiDataFusionDataSource


def peak_kib():
    # VmHWM: this process's own peak (ru_maxrss would carry the parent's over exec).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run(path, query):
    ctx = SessionContext()
    ctx.register_table("t", HudiDataFusionDataSource(path))
    return ctx, ctx.sql(query).to_arrow_table()


def main(argv):
    path, query, runs = argv[1], argv[2], int(argv[3])
    seconds = []
    answer = None
    for _ in range(runs):
        start = time.perf_counter()
        _, table = run(path, query)
        seconds.append(time.perf_counter() - start)
        row = table.to_pylist()[0]
        answer = [row["n"], row["s"]]
    ctx, _ = run(path, query)
    plan = ctx.sql("EXPLAIN ANALYZE " + query).to_arrow_table().column("plan")[0].as_py()
    scan = next((l.strip() for l in plan.splitlines() if "DataSourceExec" in l), "")
    print(json.dumps({"hudi": hudi.__version__, "datafusion": datafusion.__version__,
                      "seconds": seconds, "answer": answer, "plan": scan,
                      "peak_kib": peak_kib()}))


if __name__ == "__main__":
    main(sys.argv)
