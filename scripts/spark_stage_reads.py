"""Spark reads what arbor writes (issue 34 item 2).

For copy-on-write and merge-on-read, with a metadata table carrying every index arbor builds
(files, column stats, partition stats, record index, a secondary index) and without one, arbor
writes a table of awkward types (zoned and naive timestamps, decimals, dates, nested structs,
lists, nulls) through an insert, an upsert, a delete and (merge-on-read) a compaction and a
later upsert into logs. Spark must read, value for value and with the same `_hoodie_*` meta
columns: the snapshot, time travel to every completed instant, incremental ranges,
read-optimized, with the metadata table off, and filtered queries with data skipping on (a
wrong stat silently drops rows) against arbor's own `--where`. Then the same table after a
partition TTL run and a clean, after a publication (and a main write and a second
publication), after a merge of a diverged branch and after a rebased branch's publication
(issue 35), and its detached and deep clones. Under Hudi 1.2 the same runs on copy-on-write and
merge-on-read tables arbor creates with Lance base files (`--base-format lance`, issue 39).
"""

import datetime
import decimal
import os

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stage_lib import CheckFailed, require

SCHEMA = pa.schema([
    ("id", pa.string()),
    ("city", pa.string()),
    ("n", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("ts_local", pa.timestamp("us")),
    ("amount", pa.decimal128(10, 2)),
    ("day", pa.date32()),
    ("ok", pa.bool_()),
    ("ratio", pa.float64()),
    ("small", pa.int32()),
    ("info", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ("tags", pa.list_(pa.string())),
    ("note", pa.string()),
])

CITIES = ["la", "nyc", "sf"]


def rows(ids, n):
    out = []
    for i in ids:
        out.append({
            "id": f"k{i:03d}",
            "city": CITIES[i % 3],
            "n": n,
            "ts": datetime.datetime(2024, 1, 1 + i % 28, 12, i % 60, tzinfo=datetime.timezone.utc),
            "ts_local": datetime.datetime(2024, 6, 1 + i % 28, 8, n % 60, 30),
            "amount": decimal.Decimal(f"{i * 10 + n}.{n % 100:02d}"),
            "day": datetime.date(2023, 1 + i % 12, 1 + i % 28),
            "ok": None if i % 4 == 0 else (i % 2 == 0),
            "ratio": None if i % 5 == 0 else i / 8 + n,
            "small": i * n,
            "info": None if i % 6 == 0 else {"a": i, "b": None if i % 3 == 0 else f"b{i}-{n}"},
            "tags": None if i % 7 == 0 else [f"t{j}" for j in range(i % 3)],
            "note": None if i % 2 else f"note {i} at {n}",
        })
    return out


class Table:
    def __init__(self, stage, name, kind, mdt):
        self.stage = stage
        self.kind = kind
        self.mdt = mdt
        self.path = stage.path(name)
        self.name = name
        self.n = 0

    def parquet(self, data):
        self.n += 1
        path = os.path.join(self.stage.work, f"{self.name}-in{self.n}.parquet")
        table = pa.Table.from_pylist(data, schema=SCHEMA)
        if self.stage.hudi.startswith("1.0."):
            # Hudi 1.0 reads a naive timestamp (Avro local-timestamp-micros) as a plain long:
            # 1.1 and 1.2 check that column.
            table = table.drop_columns(["ts_local"])
        pq.write_table(table, path)
        return path

    def write(self, data, *extra):
        return self.stage.arbor.write(self.path, self.parquet(data), *extra)


def build(stage, name, kind, mdt, base_format="parquet"):
    t = Table(stage, name, kind, mdt)
    create = ["--op", "insert", "--type", kind, "--key", "id", "--partition-by", "city", "--ordering", "n",
              "--table-version", stage.table_version, "--base-format", base_format]
    if not mdt:
        create.append("--no-metadata-table")
    t.write(rows(range(0, 12), 1), *create)
    if mdt:
        stage.arbor("index", "create", t.path, "--column-stats", "--partition-stats")
        stage.arbor("index", "create", t.path, "--record-index")
        stage.arbor("index", "create", t.path, "--secondary", "note")
    t.write(rows([1, 2, 3, 12, 13], 2), "--op", "upsert")
    t.write(rows([4, 5], 2), "--op", "delete")
    if kind == "mor":
        stage.arbor("compact", t.path)
    t.write(rows([1, 6, 14], 3), "--op", "upsert")
    return t


def completed_writes(stage, path):
    return [i for i in stage.arbor.timeline(path)
            if i["state"] == "COMPLETED" and i["action"] in ("commit", "deltacommit", "replacecommit")]


def incremental_begin(stage, completion):
    # Hudi 1.0.x treats the begin completion time as inclusive, 1.1 and later as exclusive
    # (arbor follows 1.1). One millisecond later means the same for both.
    if stage.hudi.startswith("1.0."):
        return str(int(completion) + 1)
    return completion


def reads_of(stage, t):
    tag = f"{t.name}"
    stage.agree(f"{tag}/snapshot", t.path, ["--meta"], {"meta": True})
    writes = completed_writes(stage, t.path)
    # Every instant on the tables with a metadata table under 1.0 and 1.1; the first and the
    # last elsewhere (1.2 reads the same table version as 1.1).
    full = t.mdt and not stage.hudi.startswith("1.2.")
    for i, w in enumerate(writes):
        if not full and 0 < i < len(writes) - 1:
            continue
        stage.agree(f"{tag}/as_of_{i + 1}_{w['action']}", t.path, ["--meta", "--as-of", w["timestamp"]],
                    {"meta": True, "as_of": w["timestamp"]})
    first, second = writes[0], writes[1]
    stage.agree(f"{tag}/incremental_after_1st", t.path, ["--meta", "--incremental", first["completion_time"]],
                {"meta": True, "incremental": [incremental_begin(stage, first["completion_time"]), None]})
    stage.agree(f"{tag}/incremental_2nd_only", t.path,
                ["--meta", "--incremental", first["completion_time"], second["completion_time"]],
                {"meta": True, "incremental": [incremental_begin(stage, first["completion_time"]),
                                               second["completion_time"]]})
    if t.kind == "mor":
        stage.agree(f"{tag}/read_optimized", t.path, ["--meta", "--read-optimized"],
                    {"meta": True, "read_optimized": True})
    if t.mdt:
        stage.agree(f"{tag}/snapshot_mdt_off", t.path, [], {"options": {"hoodie.metadata.enable": "false"}})
        skipping = {"hoodie.metadata.enable": "true", "hoodie.enable.data.skipping": "true",
                    "hoodie.metadata.index.column.stats.enable": "true",
                    "hoodie.metadata.index.partition.stats.enable": "true",
                    "hoodie.metadata.record.index.enable": "true"}
        # (id, arbor --where predicates (all must hold), the same in Spark SQL)
        filters = [
            ("n_ge_2", ["n >= 2"], "n >= 2"),
            ("amount_gt", ["amount > 100.5"], "amount > 100.5"),
            ("ts_range", ["ts >= '2024-01-05 00:00:00'"], "ts >= TIMESTAMP '2024-01-05 00:00:00'"),
            ("day_eq", ["day = '2023-03-03'"], "day = DATE '2023-03-03'"),
            ("key_eq", ["id = 'k003'"], "id = 'k003'"),
            ("note_eq", ["note = 'note 2 at 2'"], "note = 'note 2 at 2'"),
            ("city_in_and", ["city IN ('sf', 'la')", "small > 3"], "city IN ('sf', 'la') AND small > 3"),
            ("nested", ["info.a >= 7"], "info.a >= 7"),
        ]
        if stage.hudi.startswith("1.2."):
            filters = filters[:3]  # 1.1 ran the rest on the same table version
        for fid, arbor_wheres, spark_where in filters:
            args = [x for w in arbor_wheres for x in ("--where", w)]
            stage.agree(f"{tag}/skipping_{fid}", t.path, args, {"where": spark_where, "options": skipping})
        stage.java_validates(f"{tag}/java_mdt_listing", t.path)


def after_services(stage, t):
    """TTL, clean, publications and clones on table `t` (with a metadata table)."""
    a = stage.arbor
    tag = t.name
    a("ttl", "set", t.path, "--policy", "count", "--retain", "2")
    out = a("ttl", "run", t.path, "--json").stdout
    stage.check(f"{tag}/ttl_deleted_la", lambda: require('"la"' in out or "la" in out, f"ttl run: {out[:500]}"))
    stage.agree(f"{tag}/after_ttl", t.path, ["--meta"], {"meta": True})
    a("clean", t.path, "--policy", "commits", "--retain", "1")
    stage.agree(f"{tag}/after_clean", t.path, ["--meta"], {"meta": True})
    stage.validates(f"{tag}/validate_after_clean", t.path)

    # Publication: a branch with a write, published; Spark reads main through the table path.
    a("branch", "create", t.path, "pub1")
    t.write(rows([20, 21, 2], 5), "--op", "upsert", "--branch", "pub1")
    a("branch", "publish", t.path, "pub1")
    stage.agree(f"{tag}/after_publication", t.path, ["--meta"], {"meta": True})
    stage.agree(f"{tag}/after_publication_mdt_off", t.path, [], {"options": {"hoodie.metadata.enable": "false"}})
    t.write(rows([22, 3], 6), "--op", "upsert")
    stage.agree(f"{tag}/main_write_after_publication", t.path, ["--meta"], {"meta": True})
    a("branch", "create", t.path, "pub2")
    t.write(rows([23], 7), "--op", "upsert", "--branch", "pub2")
    a("branch", "publish", t.path, "pub2")
    stage.agree(f"{tag}/after_second_publication", t.path, ["--meta"], {"meta": True})
    writes = completed_writes(stage, t.path)
    for i, w in list(enumerate(writes))[-3:]:
        stage.agree(f"{tag}/published_as_of_{i + 1}", t.path, ["--meta", "--as-of", w["timestamp"]],
                    {"meta": True, "as_of": w["timestamp"]})
    stage.java_validates(f"{tag}/java_mdt_listing_published", t.path)

    # A merge of a diverged branch (issue 35): one upsert commit, read value for value,
    # including a record that replaces one with a greater ordering value (--strategy source).
    a("branch", "create", t.path, "mrg")
    t.write(rows([2, 24], 8), "--op", "upsert", "--branch", "mrg")
    t.write(rows([2], 9), "--op", "upsert")
    out = a("branch", "merge", t.path, "mrg", "--strategy", "source", "--json").stdout
    stage.check(f"{tag}/merge_committed", lambda: require('"commit": "' in out, f"merge: {out[:500]}"))
    stage.agree(f"{tag}/after_merge", t.path, ["--meta"], {"meta": True})
    # The branch's own files are on storage under instants main does not have (Java's listing
    # would name them) until the branch is dropped and a clean frees them.
    a("branch", "drop", t.path, "mrg")
    a("clean", t.path)
    stage.agree(f"{tag}/after_merge_and_clean", t.path, ["--meta"], {"meta": True})
    stage.java_validates(f"{tag}/java_mdt_listing_merged", t.path)

    # A rebase of a diverged branch onto main's head, then a fast-forward publication.
    a("branch", "create", t.path, "rb")
    t.write(rows([2, 25], 10), "--op", "upsert", "--branch", "rb")
    t.write(rows([26], 11), "--op", "upsert")
    out = a("branch", "rebase", t.path, "rb", "--json").stdout
    stage.check(f"{tag}/rebase_carried", lambda: require('"commit": "' in out, f"rebase: {out[:500]}"))
    a("branch", "publish", t.path, "rb", "--drop")
    stage.agree(f"{tag}/after_rebase_publication", t.path, ["--meta"], {"meta": True})

    # Clones: a deep clone and a detached shallow clone are whole tables Spark reads.
    deep = stage.path(f"{t.name}-deep")
    a("clone", t.path, deep, "--deep")
    stage.agree(f"{tag}/deep_clone", deep, ["--meta"], {"meta": True})
    shallow = stage.path(f"{t.name}-detached")
    a("clone", t.path, shallow)
    a("clone", "detach", shallow)
    stage.agree(f"{tag}/detached_clone", shallow, ["--meta"], {"meta": True})
    stage.java_validates(f"{tag}/java_mdt_listing_detached", shallow)


def run(stage):
    tables = []
    for kind in ("cow", "mor"):
        for mdt in (True, False):
            name = f"{kind}{'' if mdt else '_nomdt'}"
            try:
                tables.append(build(stage, name, kind, mdt))
            except Exception as e:
                stage.check(f"{name}/build", lambda e=e: (_ for _ in ()).throw(CheckFailed(str(e))))
    if stage.hudi.startswith("1.2.") and str(stage.table_version) == "9":
        # Lance base files (Hudi 1.2): Spark reads arbor's Lance tables.
        for kind in ("cow", "mor"):
            name = f"lance_{kind}"
            try:
                tables.append(build(stage, name, kind, True, "lance"))
            except Exception as e:
                stage.check(f"{name}/build", lambda e=e: (_ for _ in ()).throw(CheckFailed(str(e))))
    for t in tables:
        reads_of(stage, t)
    for t in tables:
        if t.mdt:
            after_services(stage, t)
