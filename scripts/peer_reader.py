#!/usr/bin/env python3
"""arbor's peer-reader harness: what the independent reader hudi-rs (PyPI `hudi`, pinned
0.5.0) sees in a Hudi table, printed as one JSON document on stdout.

Usage: peer_reader.py TABLE_DIR

Output keys:
  timeline      completed commit / deltacommit / replacecommit instants hudi-rs loads, sorted by
                instant time: {"timestamp", "action", "operation"}
  latest_commit the latest completed instant time hudi-rs reports (null when none)
  row_count     rows of a snapshot read
  columns       the snapshot's column names
Exit status 0 on success; 1 with a one-line message on stderr when hudi fails.
"""

import json
import sys

import pyarrow as pa
from hudi import HudiReadOptions, HudiTable


def main(argv):
    if len(argv) != 2:
        print("usage: peer_reader.py TABLE_DIR", file=sys.stderr)
        return 2
    try:
        table = HudiTable(argv[1])
        tl = table.get_timeline()
        seen = {}
        for getter in (tl.get_completed_commits, tl.get_completed_deltacommits,
                       tl.get_completed_replacecommits):
            for inst in getter():
                meta = json.loads(tl.get_instant_metadata_in_json(inst))
                seen[(inst.timestamp, inst.action)] = {
                    "timestamp": inst.timestamp,
                    "action": inst.action,
                    "operation": meta.get("operationType"),
                }
        instants = [seen[k] for k in sorted(seen)]
        latest = tl.get_latest_commit_timestamp() if instants else None
        batches = table.read(HudiReadOptions())
        rows = sum(b.num_rows for b in batches)
        if batches:
            columns = pa.Table.from_batches(batches).column_names
        else:
            columns = table.get_schema_with_meta_fields().names
    except Exception as e:  # hudi raises several exception types; all are failures here
        print(f"hudi failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    doc = {"timeline": instants, "latest_commit": latest, "row_count": rows, "columns": columns}
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
