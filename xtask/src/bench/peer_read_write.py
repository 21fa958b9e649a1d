# hudi-rs (PyPI `hudi`, 0.5.0) reading a table and pyarrow writing the rows to one parquet
# file, as `arbor read TABLE --format parquet --output OUT` does: the snapshot, sorted by
# partition path then record key, the data columns only (no _hoodie_* meta columns). Run by
# `cargo xtask bench rss` under /usr/bin/time -v (a whole process: start-up included) as
#   python -c "$(cat peer_read_write.py)" TABLE_DIR OUT
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from hudi import HudiReadOptions, HudiTable


def main(argv):
    path, out = argv[1], argv[2]
    batches = HudiTable(path).read(HudiReadOptions())
    table = pa.Table.from_batches(batches)
    del batches
    table = table.sort_by([("_hoodie_partition_path", "ascending"),
                           ("_hoodie_record_key", "ascending")])
    table = table.select([c for c in table.column_names if not c.startswith("_hoodie_")])
    pq.write_table(table, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
