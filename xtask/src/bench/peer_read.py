# Times hudi-rs (PyPI `hudi`, 0.5.0) reading a table, inside one Python process so that
# interpreter start-up and imports are not counted. Run by `cargo xtask bench` as
#   python -c "$(cat peer_read.py)" TABLE_DIR RUNS UPDATE_TS
# Each run is `HudiTable(TABLE_DIR).read(HudiReadOptions())`: timeline load, file listing,
# reading and merging every file slice into Arrow batches. Prints one JSON line:
#   {"hudi": version, "seconds": [per run], "rows": rows of the last run,
#    "updated": rows of the last run whose `ts` >= UPDATE_TS}
import json
import sys
import time

import hudi
import pyarrow.compute as pc
from hudi import HudiReadOptions, HudiTable


def main(argv):
    path, runs, update_ts = argv[1], int(argv[2]), int(argv[3])
    seconds = []
    batches = None
    for _ in range(runs):
        batches = None
        start = time.perf_counter()
        batches = HudiTable(path).read(HudiReadOptions())
        seconds.append(time.perf_counter() - start)
    rows = sum(b.num_rows for b in batches)
    updated = 0
    for b in batches:
        updated += pc.sum(pc.greater_equal(b.column("ts"), update_ts)).as_py() or 0
    print(json.dumps({"hudi": hudi.__version__, "seconds": seconds, "rows": rows,
                      "updated": updated}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
