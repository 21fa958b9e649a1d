#!/usr/bin/env python3
"""Canonical digests of what the peer reader (hudi-rs through PyPI `hudi`, pinned 0.5.0) reads
from a Hudi table, and of rows in Arrow IPC files, with the canonicalisation of
scripts/canonical_rows.py (its functions are imported, so both always agree).

Usage:
  peer_digest.py TABLE [--as-of T | --incremental S E]
      One query of the table at TABLE (the directory holding .hoodie/): the latest snapshot,
      time travel as of instant T (hudi 0.5.0 compares T with requested instant times), or the
      incremental range (S, E] (for table version 8 and later hudi 0.5.0 compares S and E with
      completion times). Prints one JSON line.
  peer_digest.py --arrow FILE.arrow
      The digest of the rows of an Arrow IPC file (as canonical_rows.py computes it).
  peer_digest.py --batch REQUESTS.jsonl
      Many requests in one process (starting Python with pyarrow and hudi costs about half a
      second each time). One JSON object a line, each one of
        {"id": ..., "table": DIR}                          latest snapshot
        {"id": ..., "table": DIR, "as_of": T}              time travel
        {"id": ..., "table": DIR, "incremental": [S, E]}   incremental (S, E]
        {"id": ..., "arrow": FILE}                         digest of an Arrow IPC file
      Prints one JSON line per request, in order: the request's "id" plus the digest keys, or
      {"id": ..., "error": MESSAGE} when that request failed (the others still run).

Digest keys: row_count, data_sha256 (rows without the _hoodie_* meta columns), rows_sha256
(whole rows), schema ([name, arrow type, nullable] per column; for an empty result the schema
the reader declares, with meta columns).
Exit status: 0 on success (in batch mode: every line was printed, even error lines); 1 with a
one-line message on stderr when a single query fails; 2 on usage errors.
"""

import argparse
import hashlib
import json
import os
import sys

import pyarrow as pa
import pyarrow.ipc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from canonical_rows import META, column, dumps  # noqa: E402  (same directory)


def digest_table(table):
    """row_count, data_sha256, rows_sha256 and schema of a pyarrow Table, as canonical_rows.py."""
    names = table.column_names
    cols = [column(table.column(i)) for i in range(table.num_columns)]
    rows = [dict(zip(names, values)) for values in zip(*cols)] if cols else []
    if "_hoodie_record_key" in names:
        order = lambda r: (str(r.get("_hoodie_record_key")), str(r.get("_hoodie_partition_path")), dumps(r))
    else:
        order = dumps
    whole = [dumps(r) for r in sorted(rows, key=order)]
    data = sorted(dumps({k: v for k, v in r.items() if k not in META}) for r in rows)
    sha = lambda lines: hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    return {
        "row_count": len(rows),
        "data_sha256": sha(data),
        "rows_sha256": sha(whole),
        "schema": [[f.name, str(f.type), f.nullable] for f in table.schema],
    }


def digest_arrow(path):
    with pa.ipc.open_file(path) as reader:
        return digest_table(reader.read_all())


class Peer:
    """Opens each table once (hudi loads its timeline when the table is opened)."""

    def __init__(self):
        self.tables = {}

    def table(self, path):
        from hudi import HudiTable

        path = os.path.abspath(path)
        if path not in self.tables:
            self.tables[path] = HudiTable(path)
        return self.tables[path]

    def digest(self, path, as_of=None, incremental=None):
        from hudi import HudiQueryType, HudiReadOptions

        table = self.table(path)
        ro = HudiReadOptions()
        if incremental is not None:
            start, end = incremental
            ro = (ro.with_query_type(HudiQueryType.Incremental)
                  .with_start_timestamp(start).with_end_timestamp(end))
        elif as_of is not None:
            ro = ro.with_as_of_timestamp(as_of)
        batches = table.read(ro)
        if batches:
            data = pa.Table.from_batches(batches)
        else:
            data = table.get_schema_with_meta_fields().empty_table()
        return digest_table(data)


def answer(peer, req):
    if "arrow" in req:
        return digest_arrow(req["arrow"])
    return peer.digest(req["table"], as_of=req.get("as_of"), incremental=req.get("incremental"))


def run_batch(path):
    peer = Peer()
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for line in lines:
        req = json.loads(line)
        try:
            doc = answer(peer, req)
        except Exception as e:  # hudi raises several exception types; each is this request's failure
            doc = {"error": f"{type(e).__name__}: {e}"}
        doc["id"] = req.get("id")
        print(dumps(doc), flush=False)
    sys.stdout.flush()
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("table", nargs="?")
    p.add_argument("--as-of", metavar="T")
    p.add_argument("--incremental", nargs=2, metavar=("S", "E"))
    p.add_argument("--arrow", metavar="FILE")
    p.add_argument("--batch", metavar="REQUESTS")
    args = p.parse_args(argv[1:])
    modes = sum(x is not None for x in (args.table, args.arrow, args.batch))
    if modes != 1:
        p.error("give exactly one of TABLE, --arrow FILE, --batch REQUESTS")
    if args.as_of and args.incremental:
        p.error("--as-of and --incremental are mutually exclusive")
    if args.table is None and (args.as_of or args.incremental):
        p.error("--as-of and --incremental need TABLE")
    if args.batch:
        return run_batch(args.batch)
    try:
        if args.arrow:
            doc = digest_arrow(args.arrow)
        else:
            doc = Peer().digest(args.table, as_of=args.as_of, incremental=args.incremental)
    except Exception as e:  # hudi raises several exception types; all are failures here
        print(f"peer_digest: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
