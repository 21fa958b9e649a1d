"""Java's cleaner against what arbor protects, Spark following publications, and the metadata
table both ways (issue 34 items 4 and 5), as the `protect` scenario of scripts/spark_stage.py.

Part 1, protections (per table type; docs/java_clean_protection.md):

    w1 (insert a,b in sf; c in nyc), w2, [MOR: arbor compact], w3           upserts of every key
    arbor tag create T v1 --instant w1
    arbor branch create T audit          # base = w3 (main's head); arbor pins it with a savepoint
    arbor write T ... --branch audit  x2                # b1: a (sf), e (la, a new partition); b2: a
    w4, w5, [MOR: arbor compact], arbor clone T T_clone       # the clone pins main's head (not w3)
    w6, w7, [MOR: arbor compact], w8, [MOR: arbor compact], w9   # MOR: w8's slice is unprotected

arbor records every view (main, main as of each write, the tag, the branch, the branch as of its
base, b1, b2 and of w2 (history before its base), the clone); Spark runs
`CALL run_clean(retain_commits => 1)`, arbor writes w10 (Java schedules a clean only after a commit
since the last one), Spark runs `CALL run_clean(clean_policy => 'KEEP_LATEST_FILE_VERSIONS',
file_versions_retained => 1)`. One check per view: it reads exactly as before after both cleans.
Views of history that no savepoint pins (main as of a write other than the tag's, the branch
base's and the clone's instant; the branch as of w2, before its base) are only as good as main's
retention: they pass when they read the same or fail with an error (main's must be arbor's "no
longer retained" error; the branch's error is reported in the check's detail), never when they
read other rows. Also: Java deleted files (the test is not vacuous), Spark reads main as arbor
does after each clean, `arbor validate` passes on main, the branch and the clone.

Then a publication: branch `pub` from main's head, a write, `arbor branch publish`; Spark reads
the table path (snapshot, metadata table off, time travel to main's last write before it) as
arbor reads main; a Spark upsert lands in main and arbor reads it; a second publication, which
Spark reads; the tag, the clone and branch audit still read as before.

Part 2, metadata arbitration (per table type):
  - Spark writes a table with every index it has (metadata table with column stats, partition
    stats, record index, and a secondary index on `city` through `CREATE INDEX idx_city ON t
    (city)`, from which 1.0.2, 1.1.1 and 1.2.0 derive a secondary index; 1.1.1 refuses `USING
    secondary_index` with "secondary_index is not supported"; the index is built by its own write
    client, which needs `hoodie.write.lock.provider`, set for that statement only), timestamp, decimal (10,2 and 20,4), date, struct, double, float and boolean
    columns with nulls; then an upsert without small-file packing (MOR: updates in log files) and
    new keys. `arbor validate` recomputes the stats records of Java's files and the record and
    secondary index entries: one check, whose failure lists each difference (file, column, value
    type, and per field Java's stored value and arbor's recomputed one).
  - arbor writes the same rows, builds every index (`arbor index create T --column-stats`,
    `--partition-stats`, `--record-index`, `--secondary city`, one a call), upserts (MOR: log
    files) and bulk-inserts new keys. Its `column_stats` index covers the columns Java chose for
    the same schema (index.json `sourceFields`), `arbor validate` passes, Java's metadata-table
    listing agrees with storage (`stage.java_validates`), Java's reader decodes arbor's column
    stats (`show_metadata_table_column_stats`), and Spark with `hoodie.enable.data.skipping=true`
    returns the same rows as without for a filter on each stats column (and the record key, the
    secondary index column and the partition column).
"""

import datetime
import decimal
import os
import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from canonical_rows import dumps
from spark_stage_lib import CheckFailed, require, table_properties, table_types

ROWS_HEADER = ["id", "city", "fare", "n"]
SCHEMA = "id STRING, city STRING, fare DOUBLE, n BIGINT"
RETAINED_ERROR = "no longer retained"
LOCK_PROVIDER = "hoodie.write.lock.provider"
IN_PROCESS_LOCK = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"


def kinds(stage, both_on=()):
    """The table types one Hudi version covers (spark_stage_lib.table_types: one per version
    in CI, taking turns, so every type meets both table versions; both with
    ARBOR_SPARK_FULL=1 or on the versions in `both_on`)."""
    return table_types(stage, "protect", both_on)


def run(stage):
    published = []
    for kind in kinds(stage):
        t = protect_table(stage, kind)
        if t is not None:
            published.append(t)
    for t in published:
        publication(stage, t)
    found = {}
    # Java 1.0 is the only writer of version-8 stats: both types there.
    for kind in kinds(stage, both_on=("1.0",)):
        spark_written_stats(stage, kind, found)
    for kind in kinds(stage):
        arbor_written_stats(stage, kind, found)


def step(stage, cid, fn):
    """A check whose value the scenario needs: fn's return value, or None when it failed."""
    box = []

    def wrapped():
        box.append(fn())
        return _detail(box[0])

    return box[0] if stage.check(cid, wrapped) else None


def _detail(v):
    if isinstance(v, dict):
        return {k: x for k, x in v.items() if not k.startswith("_")}
    return None


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    return path


# ---------------------------------------------------------------------------------------------
# Part 1: protections


def protect_table(stage, kind):
    a = stage.arbor
    t = fresh(stage.path(kind))
    clone = fresh(stage.path(f"{kind}-clone"))
    name = f"protect_{kind}_{stage.hudi.replace('.', '_')}"
    tb = {"kind": kind, "path": t, "clone": clone, "name": name, "main_writes": [], "branch_writes": []}

    def main_write(i, *extra):
        rows = [("a", "sf", f"{i}.5", i), ("b", "sf", f"{i}.25", i), ("c", "nyc", f"{i}.75", i)]
        tb["main_writes"].append(a.write(t, a.csv(ROWS_HEADER, rows), *extra))

    def build():
        main_write(1, "--op", "insert", "--type", kind, "--key", "id", "--partition-by", "city",
                   "--ordering", "n", "--table-version", stage.table_version)
        main_write(2)
        if kind == "mor":
            a("compact", t)  # the branch then inherits a slice whose base no tag names
        main_write(3)
        a("tag", "create", t, "v1", "--instant", tb["main_writes"][0])
        created = a.json("branch", "create", t, "audit")
        tb["branch_base"] = created.get("base_instant")
        require(tb["branch_base"] == tb["main_writes"][2],
                f"branch audit's base is {tb['branch_base']}, main's head was {tb['main_writes'][2]}")
        tb["branch_writes"].append(a.write(t, a.csv(ROWS_HEADER, [("a", "sf", "100.5", 100), ("e", "la", "7.5", 7)]),
                                           "--branch", "audit"))
        tb["branch_writes"].append(a.write(t, a.csv(ROWS_HEADER, [("a", "sf", "101.5", 101)]), "--branch", "audit"))
        main_write(4)
        main_write(5)
        if kind == "mor":
            a("compact", t)
        tb["clone_instant"] = a.json("clone", t, clone).get("instant")
        main_write(6)
        main_write(7)
        if kind == "mor":
            a("compact", t)
        main_write(8)
        if kind == "mor":
            a("compact", t)  # the slice of w8 (compaction + log) is one no savepoint keeps
        main_write(9)
        tb["savepoints"] = a.json("savepoint", "list", t)
        return {"main_writes": tb["main_writes"], "branch_writes": tb["branch_writes"],
                "branch_base": tb["branch_base"], "clone_instant": tb["clone_instant"],
                "savepoints": [(s["instant"], s.get("comment")) for s in tb["savepoints"]]}

    if step(stage, f"{kind}/build", build) is None:
        return None

    # arbor pins the branch's base itself: a savepoint on main at w3 (none made by hand here)
    def base_pinned():
        sp = {s["instant"]: s.get("comment") for s in tb["savepoints"]}
        require(tb["branch_base"] in sp,
                f"no savepoint on main at branch audit's base {tb['branch_base']}: savepoints {dumps(sp)}")
        return {"savepoint": tb["branch_base"], "comment": sp[tb["branch_base"]]}

    stage.check(f"{kind}/branch_base_savepoint", base_pinned)

    pinned = {tb["main_writes"][0], tb["branch_base"], tb["clone_instant"]}
    views = [("main", t, [], False)]
    for i, inst in enumerate(tb["main_writes"], 1):
        views.append((f"main@w{i}", t, ["--as-of", inst], inst not in pinned))
    views += [
        ("tag:v1", t, ["--tag", "v1"], False),
        ("branch:audit", t, ["--branch", "audit"], False),
        ("branch:audit@base", t, ["--branch", "audit", "--as-of", tb["branch_base"]], False),
        ("branch:audit@b1", t, ["--branch", "audit", "--as-of", tb["branch_writes"][0]], False),
        ("branch:audit@b2", t, ["--branch", "audit", "--as-of", tb["branch_writes"][1]], False),
        ("branch:audit@w2-before-base", t, ["--branch", "audit", "--as-of", tb["main_writes"][1]], True),
        ("clone", clone, [], False),
    ]
    tb["views"] = views

    def record():
        return {vid: a.view(path, extra) for vid, path, extra, _ in views}

    before = record()
    tb["before"] = before
    stage.check(f"{kind}/views_read_before_cleans", lambda: require(
        not [v for v, d in before.items() if "error" in d],
        f"views that fail before any clean: {dumps({v: d['error'] for v, d in before.items() if 'error' in d})}"))

    # ---- Java clean 1: KEEP_LATEST_COMMITS, 1 commit retained
    stage.spark_sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{t}'")
    stage.agree(f"{kind}/spark_main_before_cleans", t)
    files0 = storage_files(t)
    clean1 = step(stage, f"{kind}/java_clean_retain_commits_1", lambda: java_clean(
        stage, name, t, files0, f"CALL run_clean(table => '{name}', retain_commits => 1)"))
    after1 = record()
    stage.agree(f"{kind}/spark_main_after_clean_commits", t)

    # ---- Java clean 2: KEEP_LATEST_FILE_VERSIONS, 1 version retained (after one more main write)
    main_write(10)
    before2 = dict(after1)
    before2["main"] = a.view(t)
    files1 = storage_files(t)
    clean2 = step(stage, f"{kind}/java_clean_file_versions_1", lambda: java_clean(
        stage, name, t, files1,
        f"CALL run_clean(table => '{name}', clean_policy => 'KEEP_LATEST_FILE_VERSIONS', file_versions_retained => 1)"))
    after2 = record()
    stage.agree(f"{kind}/spark_main_after_clean_file_versions", t)
    deleted = (clean1 or {}).get("_deleted", set()) | (clean2 or {}).get("_deleted", set())
    stage.check(f"{kind}/java_deleted_files", lambda: require(
        deleted, "Java's cleans deleted no file: nothing was tested") or {"deleted": len(deleted)})

    # ---- one check per view
    for vid, path, extra, may_lapse in views:
        stage.check(f"{kind}/view/{vid}", lambda vid=vid, may_lapse=may_lapse: judge_view(
            vid, may_lapse, [("retain_commits_1", before[vid], after1[vid]),
                             ("file_versions_1", before2[vid], after2[vid])]))

    stage.validates(f"{kind}/arbor_validate_main_after_cleans", t)
    stage.validates(f"{kind}/arbor_validate_branch_after_cleans", t, "--branch", "audit")
    stage.validates(f"{kind}/arbor_validate_clone_after_cleans", clone)
    return tb


def judge_view(vid, may_lapse, steps):
    """Rows identical after each clean; a view of unpinned history may fail instead (never read
    other rows). Returns what each clean did to the view."""
    out = {}
    for name, b, after in steps:
        if "error" in b:
            if may_lapse and "error" in after:
                out[name] = {"error (already before this clean)": after["error"]}
                continue
            raise CheckFailed(f"{vid} did not read before the clean ({name}): {b['error']}")
        if "error" in after:
            if not may_lapse:
                raise CheckFailed(f"{vid} read {b['row_count']} rows before Java's clean ({name}), now fails: {after['error']}")
            if vid.startswith("main@") and RETAINED_ERROR not in after["error"]:
                raise CheckFailed(f"{vid} fails after Java's clean ({name}) without arbor's "
                                  f"'{RETAINED_ERROR}' error: {after['error']}")
            out[name] = {"error": after["error"], "names_the_clean": RETAINED_ERROR in after["error"]}
            continue
        if after["data_sha256"] != b["data_sha256"]:
            raise CheckFailed(f"{vid} reads other rows after Java's clean ({name}): before "
                              f"{dumps(b['rows'])[:1500]}, after {dumps(after['rows'])[:1500]}")
        out[name] = {"same": after["row_count"]}
    return out


def storage_files(table):
    """Data files and metadata-table files, relative to the table (no .crc, no partition
    metadata files, no timeline)."""
    out = set()
    for root, _, files in os.walk(table):
        parts = os.path.relpath(root, table).split(os.sep)
        if parts[0] == ".hoodie" and not (len(parts) >= 3 and parts[1] == "metadata" and parts[2] != ".hoodie"):
            continue
        for f in files:
            if f.endswith(".crc") or f.startswith(".hoodie_partition_metadata"):
                continue
            out.add(os.path.normpath(os.path.join(*parts, f)))
    return out


def java_clean(stage, name, path, before_files, statement):
    r = stage.spark_sql(statement)
    deleted = before_files - storage_files(path)
    data = sorted(f for f in deleted if not f.startswith(".hoodie"))
    return {"returned": r["rows"], "data_files_deleted": data,
            "mdt_files_deleted": len(deleted) - len(data), "_deleted": set(data)}


# ---------------------------------------------------------------------------------------------
# Publication: Spark follows main when arbor publishes a branch


def publication(stage, tb):
    a = stage.arbor
    kind, t = tb["kind"], tb["path"]
    last_main = tb["main_writes"][-1]
    pub = {}

    def publish1():
        a("branch", "create", t, "pub")
        pub["write"] = a.write(t, a.csv(ROWS_HEADER, [("b", "sf", "200.5", 200), ("f", "nyc", "8.5", 8)]),
                               "--branch", "pub")
        return {"publish": a.json("branch", "publish", t, "pub")}

    if step(stage, f"{kind}/publish_1", publish1) is None:
        return
    stage.agree(f"{kind}/spark_snapshot_after_publish_1", t)
    stage.agree(f"{kind}/spark_snapshot_after_publish_1_metadata_off", t,
                spark={"options": {"hoodie.metadata.enable": "false"}})
    stage.agree(f"{kind}/spark_time_travel_after_publish_1", t, ["--as-of", last_main], spark={"as_of": last_main})
    stage.agree(f"{kind}/spark_time_travel_to_published_write", t, ["--as-of", pub["write"]],
                spark={"as_of": pub["write"]})

    def spark_upsert():
        stage.spark_write(t, [{"id": "a", "city": "sf", "fare": 500.5, "n": 500},
                              {"id": "g", "city": "la", "fare": 9.5, "n": 9}], SCHEMA, {
            "hoodie.datasource.write.operation": "upsert",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.precombine.field": "n",
            "hoodie.write.auto.upgrade": "false",
            "hoodie.table.name": table_properties(t)["hoodie.table.name"]})
        rows = {r["id"]: r for r in a.view(t).get("rows", [])}
        require(rows.get("a", {}).get("fare") == 500.5 and "g" in rows,
                f"arbor does not read Spark's upsert on main: {dumps(sorted(rows.values(), key=str))[:1500]}")

    if stage.check(f"{kind}/spark_upsert_after_publish_1", spark_upsert):
        stage.agree(f"{kind}/spark_reads_its_upsert_as_arbor", t)
        stage.validates(f"{kind}/arbor_validate_after_spark_upsert", t)

    def publish2():
        a("branch", "create", t, "pub2")
        pub["write2"] = a.write(t, a.csv(ROWS_HEADER, [("c", "nyc", "300.5", 300)]), "--branch", "pub2")
        return {"publish": a.json("branch", "publish", t, "pub2")}

    if step(stage, f"{kind}/publish_2", publish2) is not None:
        stage.agree(f"{kind}/spark_snapshot_after_publish_2", t)
        stage.agree(f"{kind}/spark_time_travel_after_publish_2", t, ["--as-of", pub["write"]],
                    spark={"as_of": pub["write"]})

    def protected_still():
        same = {}
        for vid, path, extra, _ in tb["views"]:
            if vid in ("tag:v1", "clone", "branch:audit"):
                now = a.view(path, extra)
                require("error" not in now, f"{vid} fails after the publications: {now.get('error')}")
                require(now["data_sha256"] == tb["before"][vid]["data_sha256"], f"{vid} reads other rows after the publications")
                same[vid] = now["row_count"]
        return same

    stage.check(f"{kind}/protected_views_after_publications", protected_still)


# ---------------------------------------------------------------------------------------------
# Part 2: metadata arbitration

STATS_SCHEMA = ("id STRING, region STRING, city STRING, ts TIMESTAMP, amount DECIMAL(10,2), "
                "big DECIMAL(20,4), d DATE, nested STRUCT<a: INT, b: STRING, t: TIMESTAMP>, "
                "n BIGINT, score DOUBLE, ratio FLOAT, flag BOOLEAN")
UTC = datetime.timezone.utc
INDEX_OPTIONS = {
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.partition.stats.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
}


def stats_rows(ids, n, shift=0):
    """Rows with every stats type; every 5th row has nulls."""
    out = []
    for i in ids:
        k = i + shift
        null = i % 5 == 4
        out.append({
            "id": f"k{i:02d}",
            "region": ("eu", "us", "ap")[i % 3],
            "city": ("paris", "berlin", "nyc", "sf", "tokyo", "lima")[i % 6],
            "ts": None if null else datetime.datetime(2024, 1 + i % 12, 1 + i, 10, k % 60, 30, 123456 + k, tzinfo=UTC),
            "amount": None if null else decimal.Decimal(f"{(k * 37) % 1000}.{k % 100:02d}") * (-1 if i % 7 == 3 else 1),
            "big": decimal.Decimal(f"{k * 1234567}.{k % 10000:04d}"),
            "d": None if null else datetime.date(2020 + i % 5, 1 + i % 12, 1 + i % 28),
            "nested": None if i % 6 == 5 else {"a": None if null else k * 3 - 20, "b": f"s{k:03d}",
                                                "t": datetime.datetime(2023, 6, 1 + i % 28, 0, 0, k % 60, tzinfo=UTC)},
            "n": n,
            "score": None if null else k * 1.25 - 7.5,
            "ratio": float(k) / 8.0,
            "flag": None if null else bool(i % 2),
        })
    return out


def stats_write_options(name, kind, op):
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ" if kind == "mor" else "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": op,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "n",
        "hoodie.write.auto.upgrade": "false",
    }
    opts.update(INDEX_OPTIONS)
    return opts


def error_line(e):
    text = str(getattr(e, "java_exception", None) or e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:400]


def mdt_partitions(path):
    return sorted(p for p in table_properties(path).get("hoodie.table.metadata.partitions", "").split(",") if p)


def index_definition(path, name):
    import json
    try:
        with open(os.path.join(path, ".hoodie", ".index_defs", "index.json"), encoding="utf-8") as f:
            return json.load(f)["indexDefinitions"].get(name) or {}
    except (OSError, ValueError, KeyError):
        return {}


def spark_written_stats(stage, kind, found):
    t = fresh(stage.path(f"stats-spark-{kind}"))
    name = f"stats_spark_{kind}_{stage.hudi.replace('.', '_')}"
    info = {}

    def write():
        stage.spark_write(t, stats_rows(range(0, 12), 1), STATS_SCHEMA, stats_write_options(name, kind, "insert"))
        stage.spark_sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{t}'")
        # `CREATE INDEX i ON t (col)` derives a secondary index for a non-key column (1.1, 1.2);
        # `USING secondary_index` is the explicit form where a version has it
        # (Java builds the index with a separate write client, which needs a lock provider)
        errors = []
        stage.spark_sql(f"SET {LOCK_PROVIDER}={IN_PROCESS_LOCK}")
        for stmt in (f"CREATE INDEX idx_city ON {name} (city)",
                     f"CREATE INDEX idx_city ON {name} USING secondary_index(city)"):
            try:
                stage.spark_sql(stmt)
                info["secondary_index"] = stmt
                break
            except Exception as e:  # the other form, then the rest still runs
                errors.append(f"{stmt}: {error_line(e)}")
        else:
            info["secondary_index"] = f"not created: {errors}"
        stage.spark_sql(f"RESET {LOCK_PROVIDER}")
        # an upsert of some keys (MOR: log files) and new keys
        # no small-file packing, so MOR updates go to log files and new keys to new file groups
        rows = stats_rows(range(0, 12, 2), 2, shift=40) + stats_rows(range(12, 16), 2)
        if kind == "mor" and stage.hudi.startswith("1.0."):
            # Hudi 1.0.2's log-file stats (HoodieTableMetadataUtil.collectColumnRangeMetadata)
            # call toString() on a null DATE value: NullPointerException, the upsert fails
            for r in rows:
                r["d"] = r["d"] or datetime.date(2021, 1, 1)
            info["java_1_0_workaround"] = "no null date in MOR updates (NPE in collectColumnRangeMetadata)"
        opts = stats_write_options(name, kind, "upsert")
        opts["hoodie.parquet.small.file.limit"] = "0"
        stage.spark_write(t, rows, STATS_SCHEMA, opts)
        info["column_stats_columns"] = index_definition(t, "column_stats").get("sourceFields")
        found["java_columns"] = info["column_stats_columns"]
        info["metadata_partitions"] = mdt_partitions(t)
        info["log_files"] = sum(1 for d, _, fs in os.walk(t) for f in fs if ".log." in f and "/.hoodie" not in d)
        return info

    if step(stage, f"stats/spark_{kind}/write", write) is None:
        return
    stage.check(f"stats/spark_{kind}/every_index", lambda: require(
        {"column_stats", "partition_stats", "record_index"} <= set(info["metadata_partitions"])
        and any(p.startswith("secondary_index_") for p in info["metadata_partitions"])
        and (kind == "cow" or info["log_files"] > 0),
        f"Spark's table lacks an index or (MOR) log files: {dumps(info)}") or info)
    stage.agree(f"stats/spark_{kind}/arbor_reads_spark", t)

    def arbor_agrees():
        v = stage.arbor.validate(t)
        if not v["ok"]:
            raise CheckFailed(f"arbor's recomputed metadata records differ from Java's in "
                              f"{len(v.get('differences', []))} place(s): " + dumps(explain(v))[:6000])
        return {"indexes": v.get("indexes")}

    stage.check(f"stats/spark_{kind}/arbor_validate", arbor_agrees)


def debug_fields(text):
    """The fields of a Rust `Debug` struct text (`Name { a: x, b: Some(y) }`) as a dict of
    value texts."""
    body = text[text.find("{") + 1:text.rfind("}")]
    out, depth, cur = {}, 0, ""
    for ch in body + ",":
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            if ":" in cur:
                k, v = cur.split(":", 1)
                out[k.strip()] = v.strip()
            cur = ""
        else:
            cur += ch
    return out


def explain(v):
    """Each difference of `arbor validate`, with the fields where Java's stored record and
    arbor's recomputed one differ (Java's value first)."""
    out = []
    for d in v.get("differences", []):
        m = re.search(r"column (?P<column>[\w.]+): stored (?P<stored>.*?\}), "
                      r"(?:recomputed|does not cover recomputed) (?P<computed>.*)$", d)
        if not m:
            out.append({"difference": d})
            continue
        stored, computed = debug_fields(m.group("stored")), debug_fields(m.group("computed"))
        fields = {k: {"java": stored.get(k), "arbor": computed.get(k)}
                  for k in sorted(set(stored) | set(computed)) if stored.get(k) != computed.get(k)}
        out.append({"where": d.split(" column ")[0][:300], "column": m.group("column"),
                    "value_type": stored.get("value_type"), "fields": fields})
    return out


def arbor_stats_table(path, rows):
    """A parquet input with the stats schema (Arrow types of Spark's)."""
    ts = pa.timestamp("us", tz="UTC")
    schema = pa.schema([
        ("id", pa.string()), ("region", pa.string()), ("city", pa.string()), ("ts", ts),
        ("amount", pa.decimal128(10, 2)), ("big", pa.decimal128(20, 4)), ("d", pa.date32()),
        ("nested", pa.struct([("a", pa.int32()), ("b", pa.string()), ("t", ts)])),
        ("n", pa.int64()), ("score", pa.float64()), ("ratio", pa.float32()), ("flag", pa.bool_()),
    ])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


SKIPPING_FILTERS = [
    ("id", "id = 'k03'"),
    ("city", "city = 'tokyo'"),
    ("region", "region = 'us'"),
    ("ts", "ts >= TIMESTAMP '2024-06-01 00:00:00' AND ts < TIMESTAMP '2024-09-01 00:00:00'"),
    ("ts_null", "ts IS NULL"),
    ("amount", "amount > 500"),
    ("amount_negative", "amount < 0"),
    ("big", "big BETWEEN 10000000 AND 20000000"),
    ("d", "d = DATE '2022-03-03'"),
    ("d_range", "d < DATE '2021-06-01'"),
    ("nested.a", "nested.a > 100"),
    ("nested.t", "nested.t < TIMESTAMP '2023-06-05 00:00:00'"),
    ("n", "n = 3"),
    ("score", "score < 0"),
    ("ratio", "ratio >= 5.0"),
    ("flag", "flag = true"),
]


def arbor_written_stats(stage, kind, found):
    a = stage.arbor
    t = fresh(stage.path(f"stats-arbor-{kind}"))
    info = {}

    def write():
        a.write(t, arbor_stats_table(os.path.join(stage.work, f"stats-{kind}-1.parquet"), stats_rows(range(0, 12), 1)),
                "--op", "insert", "--type", kind, "--key", "id", "--partition-by", "region", "--ordering", "n",
                "--table-version", stage.table_version)
        for flag in (["--column-stats"], ["--partition-stats"], ["--record-index"], ["--secondary", "city"]):
            a("index", "create", t, *flag)
        a.write(t, arbor_stats_table(os.path.join(stage.work, f"stats-{kind}-2.parquet"),
                                     stats_rows(range(0, 12, 2), 2, shift=40)))
        a.write(t, arbor_stats_table(os.path.join(stage.work, f"stats-{kind}-3.parquet"), stats_rows(range(12, 16), 3)),
                "--op", "bulk-insert")
        info["metadata_partitions"] = mdt_partitions(t)
        info["log_files"] = sum(1 for d, _, fs in os.walk(t) for f in fs if ".log." in f and "/.hoodie" not in d)
        return info

    if step(stage, f"stats/arbor_{kind}/write", write) is None:
        return

    # the columns arbor's column_stats index covers are the ones Java chose for the same schema
    def same_columns():
        mine = index_definition(t, "column_stats").get("sourceFields")
        java = found.get("java_columns")
        require(java is not None, "no Spark-written table to compare with")
        require(mine == java, f"arbor indexes {mine}, Java (Hudi {stage.hudi}, table version "
                              f"{stage.table_version}) {java}: only arbor {sorted(set(mine or []) - set(java))}, "
                              f"only Java {sorted(set(java) - set(mine or []))}")
        return {"columns": mine}

    stage.check(f"stats/arbor_{kind}/column_stats_columns_as_java", same_columns)
    stage.check(f"stats/arbor_{kind}/every_index", lambda: require(
        {"column_stats", "partition_stats", "record_index"} <= set(info["metadata_partitions"])
        and any(p.startswith("secondary_index_") for p in info["metadata_partitions"])
        and (kind == "cow" or info["log_files"] > 0),
        f"arbor's table lacks an index or (MOR) log files: {dumps(info)}") or info)
    stage.validates(f"stats/arbor_{kind}/arbor_validate", t)
    stage.java_validates(f"stats/arbor_{kind}/java_listing", t)
    stage.agree(f"stats/arbor_{kind}/spark_snapshot", t)
    name = f"stats_arbor_{kind}_{stage.hudi.replace('.', '_')}"

    def java_reads_stats():
        stage.spark_sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{t}'")
        r = stage.spark_sql(f"CALL show_metadata_table_column_stats(table => '{name}', targetColumns => 'amount,ts,d')",
                            max_rows=10000)
        require(r["row_count"] > 0, "Java's reader lists no column stats of arbor's table")
        return {"records": r["row_count"], "columns": r["columns"], "first": r["rows"][:3]}

    stage.check(f"stats/arbor_{kind}/java_reads_column_stats", java_reads_stats)

    skip = {"hoodie.enable.data.skipping": "true", "hoodie.metadata.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true"}
    plain = {"hoodie.enable.data.skipping": "false", "hoodie.metadata.enable": "true"}
    frames = {}

    def frame(opts):
        # one DataFrame (one Hudi file index) per option set, filtered per check
        key = dumps(opts)
        if key not in frames:
            frames[key] = stage.spark.spark.read.format("hudi").options(**opts).load(t)
        return frames[key]

    for label, where in SKIPPING_FILTERS:
        def fn(where=where):
            base = collect(frame(plain).where(where))
            got = collect(frame(skip).where(where))
            require(base["row_count"] > 0, f"the filter {where} selects no row: nothing tested")
            if got["data_sha256"] != base["data_sha256"]:
                missing = [r for r in base["rows"] if r not in got["rows"]]
                raise CheckFailed(f"with data skipping Spark returns {got['row_count']} rows, without "
                                  f"{base['row_count']}; dropped: {dumps(missing)[:2000]}")
            return {"rows": base["row_count"]}

        stage.check(f"stats/arbor_{kind}/data_skipping/{label}", fn)


def collect(df):
    from peer_digest import digest_table
    from spark_peer import canonical_rows, to_arrow

    table = to_arrow(df)
    doc = digest_table(table)
    doc["rows"] = sorted(dumps(r) for r in canonical_rows(table, False))
    return doc
