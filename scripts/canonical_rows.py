#!/usr/bin/env python3
"""Canonical digest of rows in an Arrow IPC file, comparable with the peer reader's output
(../shared/fixtures/expected/*.json: row_count, data_sha256, rows_sha256, schema).

Usage: canonical_rows.py FILE.arrow   (Arrow IPC file format, as arbor's tests write it)

Every value is normalised by its Arrow type: float64 to 15 and float32 to 7 significant
digits (NaN and infinities as strings), decimals as plain strings, timestamps, dates and times
as ISO-8601 (time-zone-aware timestamps shown in UTC), binary as hex, maps as [key, value]
pairs sorted by key. A row is compact JSON with sorted keys. data_sha256 is the SHA-256 of the
sorted row lines without the _hoodie_* meta columns, joined by newlines; rows_sha256 the same over whole
rows ordered by record key, partition path and row text.
"""

import datetime
import hashlib
import json
import math
import sys

import pyarrow as pa
import pyarrow.ipc

META = {"_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
        "_hoodie_partition_path", "_hoodie_file_name"}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def float_value(v, bits):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    digits = 7 if bits <= 32 else 15
    return float(f"{v:.{digits}g}")


def canon(v, t):
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return canon(v, t.value_type)
    if pa.types.is_floating(t):
        return float_value(v, t.bit_width)
    if pa.types.is_decimal(t):
        return format(v, "f")
    if pa.types.is_timestamp(t):
        if isinstance(v, datetime.datetime):
            if v.tzinfo is not None:
                v = v.astimezone(datetime.timezone.utc)
            return v.isoformat(timespec="microseconds")
        return str(v)
    if pa.types.is_date(t) or pa.types.is_time(t):
        return v.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return bytes(v).hex()
    if pa.types.is_map(t):
        pairs = [[canon(k, t.key_type), canon(x, t.item_type)] for k, x in v]
        pairs.sort(key=lambda p: dumps(p[0]))
        return pairs
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [canon(x, t.value_type) for x in v]
    if pa.types.is_struct(t):
        return {f.name: canon(v.get(f.name), f.type) for f in t}
    if pa.types.is_duration(t):
        return str(v)
    return v


def nanos_iso(n, with_tz):
    secs, ns = divmod(n, 1_000_000_000)
    t = EPOCH + datetime.timedelta(seconds=secs)
    text = t.replace(tzinfo=None).isoformat(timespec="seconds") + f".{ns:09d}"
    return text + "+00:00" if with_tz else text


def column(col):
    t = col.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return [None if n is None else nanos_iso(n, t.tz) for n in col.cast(pa.int64()).to_pylist()]
    return [canon(v, t) for v in col.to_pylist()]


def main(argv):
    if len(argv) != 2:
        print("usage: canonical_rows.py FILE.arrow", file=sys.stderr)
        return 2
    with pa.ipc.open_file(argv[1]) as reader:
        table = reader.read_all()
    names = table.column_names
    cols = [column(table.column(i)) for i in range(table.num_columns)]
    rows = [dict(zip(names, values)) for values in zip(*cols)] if cols else []
    if "_hoodie_record_key" in names:
        order = lambda r: (str(r.get("_hoodie_record_key")), str(r.get("_hoodie_partition_path")), dumps(r))
    else:
        order = dumps
    whole = [dumps(r) for r in sorted(rows, key=order)]
    data = sorted(dumps({k: v for k, v in r.items() if k not in META}) for r in rows)
    digest = lambda lines: hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    print(dumps({
        "row_count": len(rows),
        "data_sha256": digest(data),
        "rows_sha256": digest(whole),
        "schema": [[f.name, str(f.type), f.nullable] for f in table.schema],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
