"""Clustering between arbor and Spark: `arbor cluster` on arbor's and on Spark's tables, Spark's
writes and table services after it, and Spark's scheduled plans executed by arbor
(`arbor cluster --pending`), as the `cluster` scenario of scripts/spark_stage.py.

Part 1, arbor's tables (one per type; `cluster_cow`, `cluster_mor`): arbor creates the table
(`--key id --partition-by city --ordering n`, the stage's table version, the awkward columns of
the `reads` scenario: zoned and naive timestamps, decimals, dates, structs, lists, nulls) with
three bulk inserts (a file group per partition each) and an upsert of existing keys (merge-on-
read: log files) and a delete, then builds column stats, partition stats and the record index.

  cluster        COW `arbor cluster --sort-by note` (linear); MOR `arbor cluster --sort-by
                 amount,ts --layout z-order`: a `<t>.clustering.requested`, `<t>.clustering.
                 inflight` and `<t>_<c>.replacecommit` (operation CLUSTER) on the timeline, every
                 partition left with one file group (linear: the new base files sorted)
  same_rows      Spark reads the same rows after as before (and the same `_hoodie_*` commit time,
                 sequence number, key and partition: clustering keeps them)
  agree          arbor and Spark read the same rows with the meta columns; read-optimized too
                 (MOR: the logs went into the new base files, so it equals the snapshot); a
                 filtered read with data skipping (column stats of the new files); `arbor
                 validate`; Java's metadata-table listing equals the files on storage
  spark_timeline Spark's `CALL show_clustering` lists the instant as COMPLETED and `CALL
                 show_commits` as a replacecommit (a procedure the version lacks: skipped)
  spark_upsert   a Spark DataFrame upsert (record index) of existing keys and one new key in
                 the clustered file groups; arbor and Spark read the same rows, the Spark values
  pending        arbor bulk-inserts new file groups, Spark schedules a clustering (`CALL
                 run_clustering(op => 'schedule', options => sort columns n)`), `arbor cluster
                 --pending` executes that plan: its instant completes as a replacecommit, Spark
                 reads the same rows as before and as arbor, Spark lists it COMPLETED
  compaction     (merge-on-read) arbor upserts into logs, Spark schedules a compaction (`CALL
                 run_compaction(op => 'schedule')`), `arbor compact --pending` executes it: it
                 completes as a commit, Spark reads the same rows as before and as arbor

Part 2, Spark's tables (`cluster_spark_cow`, `cluster_spark_mor`): Spark writes three inserts
(`hoodie.parquet.small.file.limit=0`: a file group each; MOR: then an upsert into logs),
`arbor cluster --sort-by fare`; Spark reads the same rows as before and as arbor and lists the
replacecommit; then Spark's `CALL run_clean(retain_commits => 1)`, a Spark upsert (Java
schedules no clustering without a commit after the last one, arbor's), `CALL run_clustering(order
=> 'n')` (schedule and execute: Java's planner must leave out the file groups arbor replaced, or
rows double) and a second `run_clean` run without error; arbor and Spark still agree, Java's clean
removed every file group arbor's replacecommit replaced, `arbor validate` passes and Java's
metadata-table listing equals storage.

Part 3, log compaction (`logcompact_mor`): arbor's merge-on-read table with the awkward columns
and the indexes of part 1, a bulk insert (a file group per partition), three upserts of the same
keys (one with a lower ordering value, which loses) and a delete (each file group then has four log
files; the deleted key one upsert brings back goes to a new file group).

  log_compact    `arbor compact --log --threshold 2`: each slice gets one new log file of the
                 instant (base and old log files stay), the timeline a `<t>.logcompaction.
                 requested`, an empty `<t>.logcompaction.inflight` and `<t>_<c>.deltacommit`, arbor's
                 timeline the operation LOG_COMPACT
  same_rows      Spark reads the same rows and meta columns as before, also with the read option
                 hoodie.optimized.log.blocks.scan.enable=true; arbor agrees; read-optimized agrees
                 (base files only); `arbor validate`
  java_scan      Java's log-record scanner with the optimized scan (compacted blocks stand in for
                 the blocks their COMPACTED_BLOCK_TIMES name) over each slice's log files returns
                 the commit time and n Spark read before, and deletes. Needed because Spark's
                 reads ignore the read option in 1.0.2 (its file group reader never sets it) and
                 1.1.1 (the reader's builder defaults it to false before reading the option);
                 1.2.0 has only the optimized scan, so every read there uses it
  spark_upsert   a Spark upsert after the log compaction (logs after the compacted one); arbor
                 and Spark agree (with the option too), arbor reads Spark's values, `arbor validate`

Check ids: cluster/<table>/<step> (about 95). Time: about 2.5 minutes per Hudi version on the
2-core machine (Spark's first write of the session takes 15-25 s of it).
"""

import datetime
import decimal
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from canonical_rows import META, dumps
from spark_stage_lib import CheckFailed, error_text, minor_of, require, table_properties
from spark_stage_reads import SCHEMA, rows as awkward_rows

NO_FILE_NAME = sorted(META - {"_hoodie_file_name"})


# ------------------------------------------------------------------------------------------------
# Timeline and storage helpers


def timeline_dir(path):
    return os.path.join(path, ".hoodie", table_properties(path).get("hoodie.timeline.path", "timeline"))


def timeline_files(path):
    d = timeline_dir(path)
    return sorted(f for f in os.listdir(d) if f[:1].isdigit() and not f.endswith(".crc")) if os.path.isdir(d) else []


def clustering_files(path, instant):
    """The timeline files of `instant`: (requested, inflight, completed name or None)."""
    files = [f for f in timeline_files(path) if f.split(".")[0].split("_")[0] == instant]
    done = [f for f in files if f.endswith(".replacecommit") and "_" in f.split(".")[0]]
    return (f"{instant}.clustering.requested" in files, f"{instant}.clustering.inflight" in files,
            done[0] if done else None)


def pending_clusterings(path):
    files = timeline_files(path)
    done = {f.split(".")[0].split("_")[0] for f in files if f.endswith(".replacecommit") and "_" in f.split(".")[0]}
    return sorted({f.split(".")[0] for f in files if f.endswith(".clustering.requested")} - done)


def check_arbor_reads_spark_values(stage, t, rows):
    """Check that arbor reads the (id, n) of `rows`, written by a Spark upsert with note
    'spark upsert 10'."""
    def values():
        a = stage.arbor.view(t.path, ["--where", "note = 'spark upsert 10'"])
        require("error" not in a, f"arbor read failed: {a.get('error')}")
        got = sorted((r["id"], r["n"]) for r in a["rows"])
        want = sorted((r["id"], r["n"]) for r in rows)
        require(got == want, f"arbor reads the Spark upsert as {got}, expected {want}")
        return {"rows": got}
    t.check("arbor_reads_spark_values", values)


def pending_compactions(path):
    """Compaction instants requested and not yet completed (a compaction completes as a commit)."""
    files = timeline_files(path)
    done = {f.split(".")[0].split("_")[0] for f in files if f.endswith(".commit") and "_" in f.split(".")[0]}
    return sorted({f.split(".")[0] for f in files if f.endswith(".compaction.requested")} - done)


def logcompaction_files(path, instant):
    """The timeline files of log compaction `instant`: (requested, inflight size or None,
    completed deltacommit name or None)."""
    d = timeline_dir(path)
    files = [f for f in timeline_files(path) if f.split(".")[0].split("_")[0] == instant]
    done = [f for f in files if f.endswith(".deltacommit") and "_" in f.split(".")[0]]
    inflight = f"{instant}.logcompaction.inflight"
    return (f"{instant}.logcompaction.requested" in files,
            os.path.getsize(os.path.join(d, inflight)) if inflight in files else None,
            done[0] if done else None)


def log_files(path):
    """(partition, file id) -> the names of its log files on storage."""
    return {(p, fid): sorted(f for f in fs if ".log." in f)
            for p, groups in data_files(path).items() for fid, fs in groups.items()}


def log_instant(name):
    """The instant of a log file name (`.<file id>_<instant>.log.<version>_<write token>`)."""
    return name.rsplit(".log.", 1)[0].rsplit("_", 1)[-1]


def data_files(path):
    """partition -> {file id: [file names]} of the base and log files on storage."""
    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if f.startswith(".hoodie_partition_metadata") or f.endswith(".crc"):
                continue
            if f.endswith(".parquet"):
                fid = f.split("_")[0]
            elif f.startswith(".") and ".log." in f:
                fid = f[1:].split("_")[0]
            else:
                continue
            part = os.path.relpath(root, path)
            out.setdefault(part, {}).setdefault(fid, []).append(f)
    return out


def file_groups_per_partition(path):
    return {p: len(g) for p, g in sorted(data_files(path).items())}


def sorted_column(path, instant, column):
    """The new base files of `instant`: each one's `column` values are in order (nulls at one
    end); returns {file: rows} or raises."""
    out = {}
    for part, groups in data_files(path).items():
        for fid, files in groups.items():
            for f in files:
                if f.endswith(".parquet") and f.rsplit("_", 1)[-1] == f"{instant}.parquet":
                    vals = pq.read_table(os.path.join(path, part, f), columns=[column]).column(0).to_pylist()
                    nn = [v for v in vals if v is not None]
                    nulls_at_end = all(v is None for v in vals[len(nn):])
                    nulls_at_start = all(v is None for v in vals[:len(vals) - len(nn)])
                    require(nn == sorted(nn) and (nulls_at_end or nulls_at_start),
                            f"{part}/{f} is not sorted by {column}: {vals}")
                    out[f"{part}/{f}"] = len(vals)
    require(out, f"no base file of instant {instant} on storage")
    return out


def is_missing_procedure(text):
    t = text.lower()
    return ("procedure" in t and ("not found" in t or "no such" in t or "unknown" in t or "not exist" in t)) \
        or "cannot find procedure" in t


# ------------------------------------------------------------------------------------------------
# A table the scenario drives


class Table:
    def __init__(self, stage, name, kind):
        self.stage = stage
        self.arbor = stage.arbor
        self.kind = kind
        # hoodie.table.name is the directory name: no dash (Spark builds Avro names from it)
        self.name = name
        self.path = os.path.join(stage.work, name)
        shutil.rmtree(self.path, ignore_errors=True)
        self.n = 0
        self.registered = False
        self.before = None  # Spark's read (meta columns) before a clustering

    def check(self, step, fn):
        return self.stage.check(f"{self.name}/{step}", fn)

    def register(self):
        if not self.registered:
            self.stage.spark_sql(f"CREATE TABLE IF NOT EXISTS {self.name} USING hudi LOCATION '{self.path}'")
            self.registered = True

    def sql(self, *statements):
        self.register()
        return self.stage.spark_sql(*statements)

    def spark_view(self, **req):
        return self.stage.spark_read(self.path, meta=True, **req)

    def timeline_tail(self, n=6):
        try:
            return [f"{e['timestamp']} {e['action']} {e.get('state')}" + (f" {e['operation']}" if e.get("operation") else "")
                    for e in self.arbor.timeline(self.path, "--all")[-n:]]
        except Exception as e:  # noqa: BLE001 (diagnostics only)
            return f"arbor timeline failed: {e}"

    def validates(self, step):
        def fn():
            v = self.arbor.validate(self.path)
            require(v["ok"], f"arbor validate failed: {dumps(v)[:2500]}")
        return self.check(step, fn)

    def agree(self, step, arbor_args=("--meta",), spark=None, expect_rows=None):
        spark = {"meta": True} if spark is None else spark
        return self.stage.agree(f"{self.name}/{step}", self.path, list(arbor_args), spark, expect_rows)

    # -- arbor's awkward rows -----------------------------------------------------------------
    def parquet(self, data):
        self.n += 1
        path = os.path.join(self.stage.work, f"{self.name}-in{self.n}.parquet")
        table = pa.Table.from_pylist(data, schema=SCHEMA)
        if self.stage.hudi.startswith("1.0."):
            table = table.drop_columns(["ts_local"])  # as the reads scenario: 1.0 reads it as a long
        pq.write_table(table, path)
        return path

    def arbor_write(self, data, *extra):
        return self.arbor.write(self.path, self.parquet(data), *extra)

    # -- steps shared by both parts ------------------------------------------------------------
    def remember_spark_rows(self, step="spark_read_before"):
        def fn():
            self.before = self.spark_view()
            return {"rows": self.before["row_count"], "file_groups": file_groups_per_partition(self.path)}
        return self.check(step, fn)

    def cluster(self, step, *args, sorted_by=None, single_group=True):
        """`arbor cluster` with args; returns its instant (or None when the check failed)."""
        out = {}

        def fn():
            before = file_groups_per_partition(self.path)
            doc = self.arbor.json("cluster", self.path, *args)
            inst = doc.get("instant")
            require(inst, f"arbor cluster wrote no instant: {dumps(doc)[:1500]}")
            req, infl, done = clustering_files(self.path, inst)
            require(req and infl and done, f"timeline files of {inst}: requested {req}, inflight {infl}, "
                                           f"completed {done}; timeline {timeline_files(self.path)[-6:]}")
            entry = [e for e in self.arbor.timeline(self.path) if e["timestamp"] == inst]
            require(entry and entry[0]["action"] == "replacecommit" and entry[0].get("operation") == "CLUSTER",
                    f"arbor's timeline shows {entry} for {inst}")
            after = file_groups_per_partition(self.path)
            detail = {"instant": inst, "completed": done, "layout": doc.get("layout"), "sort_by": doc.get("sort_by"),
                      "groups": [f"{g['partition']}: {len(g['input_file_groups'])} -> {len(g['output_file_groups'])} "
                                 f"file groups, {g['rows']} rows" for g in doc.get("groups", [])]}
            if single_group:
                require(doc.get("groups") and all(len(g["output_file_groups"]) == 1 for g in doc["groups"]),
                        f"expected one output file group per partition: {detail['groups']}")
            if sorted_by:
                detail["sorted_files"] = sorted_column(self.path, inst, sorted_by)
            detail["file_groups_on_storage"] = {"before": before, "after": after}
            out["instant"] = inst
            out["replaced"] = {(g["partition"], fid) for g in doc.get("groups", []) for fid in g["input_file_groups"]}
            return detail
        self.check(step, fn)
        return out

    def same_rows_as_before(self, step, what, **req):
        """Spark reads (spark_peer read fields `req`) the same rows as it did before (data, then
        the meta columns but the file name: clustering keeps commit time and sequence number)."""
        def fn():
            require(self.before is not None, "Spark's read before did not succeed")
            s = self.spark_view(**req)
            if s["data_sha256"] != self.before["data_sha256"]:
                only_now = [r for r in s["rows"] if r not in self.before["rows"]][:4]
                gone = [r for r in self.before["rows"] if r not in s["rows"]][:4]
                raise CheckFailed(f"Spark reads other rows after {what}: {s['row_count']} rows, before "
                                  f"{self.before['row_count']}; new {dumps(only_now)[:1200]}; gone {dumps(gone)[:1200]}")

            def keep(rs):
                return sorted(dumps({k: v for k, v in r.items() if k != "_hoodie_file_name"}) for r in rs)
            a, b = keep(s["rows"]), keep(self.before["rows"])
            if a != b:
                diff = [json.loads(x) for x in a if x not in set(b)][:3]
                was = [json.loads(x) for x in b if x not in set(a)][:3]
                raise CheckFailed(f"same data, but the meta columns {NO_FILE_NAME} changed with {what}: now "
                                  f"{dumps([{k: r.get(k) for k in NO_FILE_NAME} for r in diff])[:1200]}; before "
                                  f"{dumps([{k: r.get(k) for k in NO_FILE_NAME} for r in was])[:1200]}")
            return {"rows": s["row_count"]}
        return self.check(step, fn)

    def spark_lists(self, step, instant):
        """Spark's timeline procedures see `instant` as a completed clustering replacecommit."""
        def fn():
            detail = {}
            try:
                rows = self.sql(f"CALL show_clustering(table => '{self.name}', limit => 50)")["rows"]
                mine = [r for r in rows if instant in [str(v) for v in r.values()]]
                require(mine, f"show_clustering does not list {instant}: {dumps(rows)[:1500]}")
                require(any("COMPLETED" in str(v).upper() for r in mine for v in r.values()),
                        f"show_clustering lists {instant} not completed: {dumps(mine)}")
                detail["show_clustering"] = mine
            except CheckFailed:
                raise
            except Exception as e:  # noqa: BLE001 (a procedure this version lacks is skipped)
                text = error_text(e)
                if not is_missing_procedure(text):
                    raise
                detail["show_clustering"] = f"skipped: {text[:300]}"
            try:
                rows = self.sql(f"CALL show_commits(table => '{self.name}', limit => 50)")["rows"]
                mine = [r for r in rows if str(r.get("commit_time")) == instant]
                require(mine, f"show_commits does not list {instant}: "
                              f"{dumps([(r.get('commit_time'), r.get('action')) for r in rows])[:1500]}")
                require(mine[0].get("action") == "replacecommit", f"show_commits: {dumps(mine)}")
                detail["show_commits"] = {k: mine[0].get(k) for k in ("commit_time", "action", "total_files_added",
                                                                      "total_files_updated", "total_records_written")
                                          if k in mine[0]}
            except CheckFailed:
                raise
            except Exception as e:  # noqa: BLE001
                text = error_text(e)
                if not is_missing_procedure(text):
                    raise
                detail["show_commits"] = f"skipped: {text[:300]}"
            return detail
        return self.check(step, fn)


# ------------------------------------------------------------------------------------------------
# Part 1: arbor's tables


def spark_write_options(t, op):
    p = table_properties(t.path)
    ordering = p.get("hoodie.table.ordering.fields") or p.get("hoodie.table.precombine.field")
    return {
        "hoodie.table.name": p.get("hoodie.table.name", t.name),
        "hoodie.datasource.write.operation": op,
        "hoodie.datasource.write.table.type": p["hoodie.table.type"],
        "hoodie.datasource.write.recordkey.field": p["hoodie.table.recordkey.fields"],
        "hoodie.datasource.write.partitionpath.field": p["hoodie.table.partition.fields"],
        "hoodie.datasource.write.precombine.field": ordering,
        "hoodie.datasource.write.hive_style_partitioning": p.get("hoodie.datasource.write.hive_style_partitioning", "false"),
        "hoodie.write.auto.upgrade": "false",
        # the indexes arbor built stay (a writer with one disabled drops its partition); the
        # record index tags the upserts: an entry still naming a replaced file group shows
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.partition.stats.enable": "true",
        "hoodie.index.type": "RECORD_INDEX",
        # merge-on-read: the upsert stays in log files of arbor's new file groups (no inline
        # compaction: arbor's five delta commits would trigger one)
        "hoodie.compact.inline": "false",
        "hoodie.datasource.compaction.async.enable": "false",
    }


def spark_upsert(t, ids, bump, new_id):
    """Spark upserts the rows of `ids` (n + bump, a new note) and a copy of the first as `new_id`,
    as a DataFrame built from its own read of the table; returns the rows written."""
    from pyspark.sql import functions as F

    spark = t.stage.spark.spark
    df = spark.read.format("hudi").load(t.path).where(F.col("id").isin(ids)).drop(*sorted(META))
    df = df.withColumn("n", F.col("n") + F.lit(bump)).withColumn("note", F.lit(f"spark upsert {bump}"))
    df = df.unionByName(df.where(F.col("id") == ids[0]).withColumn("id", F.lit(new_id)))
    rows = df.collect()
    require(len(rows) == len(ids) + 1, f"Spark read {len(rows) - 1} of the keys {ids}")
    data = spark.createDataFrame(rows, df.schema)
    data.write.format("hudi").options(**spark_write_options(t, "upsert")).mode("append").save(t.path)
    return [r.asDict() for r in rows]


def build_arbor_table(stage, kind):
    t = Table(stage, f"cluster_{kind}", kind)

    def build():
        create = ["--op", "bulk-insert", "--type", kind, "--key", "id", "--partition-by", "city", "--ordering", "n",
                  "--table-version", stage.table_version]
        t.arbor_write(awkward_rows(range(0, 12), 1), *create)
        t.arbor_write(awkward_rows(range(12, 24), 2), "--op", "bulk-insert")
        t.arbor_write(awkward_rows(range(24, 36), 3), "--op", "bulk-insert")
        t.arbor_write(awkward_rows([1, 2, 13, 14, 25, 30], 4), "--op", "upsert")
        t.arbor_write(awkward_rows([4, 16], 4), "--op", "delete")
        stage.arbor("index", "create", t.path, "--column-stats", "--partition-stats")
        stage.arbor("index", "create", t.path, "--record-index")
        groups = file_groups_per_partition(t.path)
        require(len(groups) == 3 and all(n >= 3 for n in groups.values()), f"file groups per partition: {groups}")
        logs = sum(1 for g in data_files(t.path).values() for fs in g.values() for f in fs if ".log." in f)
        require(kind == "cow" or logs, "no log files on the merge-on-read table")
        return {"file_groups": groups, "log_files": logs,
                "metadata_partitions": table_properties(t.path).get("hoodie.table.metadata.partitions")}
    return t if t.check("build", build) else None


def part1(stage, kind):
    t = build_arbor_table(stage, kind)
    if t is None:
        return
    t.agree("agree_before")
    t.remember_spark_rows()
    if kind == "cow":
        res = t.cluster("cluster", "--sort-by", "note", sorted_by="note")
    else:
        res = t.cluster("cluster", "--sort-by", "amount,ts", "--layout", "z-order")
    inst = res.get("instant")
    t.same_rows_as_before("spark_same_rows_after_cluster", "arbor's clustering")
    t.agree("agree_after_cluster", expect_rows=34)
    if kind == "mor":
        t.agree("read_optimized_after_cluster", ["--meta", "--read-optimized"], {"meta": True, "read_optimized": True},
                expect_rows=34)
    skipping = {"hoodie.metadata.enable": "true", "hoodie.enable.data.skipping": "true",
                "hoodie.metadata.index.column.stats.enable": "true",
                "hoodie.metadata.index.partition.stats.enable": "true"}
    t.agree("skipping_after_cluster", ["--where", "n >= 3", "--where", "amount > 100.5"],
            {"where": "n >= 3 AND amount > 100.5", "options": skipping})
    t.validates("validate_after_cluster")
    stage.java_validates(f"{t.name}/java_mdt_listing_after_cluster", t.path)
    if inst:
        t.spark_lists("spark_timeline_lists_replacecommit", inst)

    # 2. Spark writes to the clustered table; arbor reads what Spark reads
    wrote = {}

    def upsert():
        wrote["rows"] = spark_upsert(t, ["k001", "k005", "k014", "k027"], 10, "k900")
        logs = sorted(f for g in data_files(t.path).values() for fs in g.values() for f in fs
                      if ".log." in f and inst and f.split("_")[1].split(".log.")[0] >= inst)
        if kind == "mor":
            require(logs, f"Spark's upsert wrote no log file after the clustering: timeline {t.timeline_tail(3)}")
        return {"rows": len(wrote["rows"]), "timeline_tail": t.timeline_tail(3),
                "file_groups": file_groups_per_partition(t.path), "spark_log_files": logs}
    if t.check("spark_upsert_after_cluster", upsert):
        t.agree("agree_after_spark_upsert", expect_rows=35)

        check_arbor_reads_spark_values(stage, t, wrote["rows"])
        t.validates("validate_after_spark_upsert")

    # 3. Spark schedules a clustering, arbor executes it
    pend = {}

    def schedule():
        t.arbor_write(awkward_rows(range(40, 46), 5), "--op", "bulk-insert")
        before = set(pending_clusterings(t.path))
        opts = "hoodie.clustering.plan.strategy.sort.columns=n"
        try:
            r = t.sql(f"CALL run_clustering(table => '{t.name}', op => 'schedule', options => '{opts}')")
            how = "options"
        except Exception as e:  # noqa: BLE001 (a version without `options =>`: the order argument)
            if "options" not in error_text(e):
                raise
            r = t.sql(f"CALL run_clustering(table => '{t.name}', op => 'schedule', order => 'n')")
            how = "order"
        new = sorted(set(pending_clusterings(t.path)) - before)
        require(len(new) == 1, f"Spark's schedule left pending clusterings {new} (procedure rows {dumps(r['rows'])[:600]}); "
                               f"timeline {timeline_files(t.path)[-6:]}")
        pend["instant"] = new[0]
        t.before = t.spark_view()
        return {"instant": new[0], "sort_columns_by": how, "procedure": r["rows"][:5],
                "file_groups": file_groups_per_partition(t.path)}
    if t.check("spark_schedules_clustering", schedule):
        def run_pending():
            inst = pend["instant"]
            doc = stage.arbor.json("cluster", t.path, "--pending")
            ran = [c for c in doc.get("clusterings", []) if c.get("instant") == inst]
            require(ran, f"arbor cluster --pending did not report running {inst}: {dumps(doc)[:1500]}")
            req, infl, done = clustering_files(t.path, inst)
            require(done, f"Spark's plan {inst} is not completed after arbor cluster --pending: requested {req}, "
                          f"inflight {infl}; arbor printed {dumps(doc)[:1200]}; timeline {timeline_files(t.path)[-6:]}")
            entry = [e for e in stage.arbor.timeline(t.path) if e["timestamp"] == inst]
            require(entry and entry[0]["action"] == "replacecommit" and entry[0].get("operation") == "CLUSTER",
                    f"arbor's timeline shows {entry} for {inst}")
            require(not pending_clusterings(t.path), f"still pending: {pending_clusterings(t.path)}")
            return {"instant": inst, "completed": done,
                    "groups": [f"{g['partition']}: {len(g['input_file_groups'])} -> {len(g['output_file_groups'])} "
                               f"file groups, {g['rows']} rows" for g in ran[0].get("groups", [])],
                    "file_groups": file_groups_per_partition(t.path)}
        if t.check("arbor_runs_spark_plan", run_pending):
            # the plan's strategy parameters carry the sort columns Spark was given
            t.check("files_sorted_by_plans_columns", lambda: sorted_column(t.path, pend["instant"], "n"))
            t.same_rows_as_before("spark_same_rows_after_pending", "arbor's run of Spark's plan")
            t.agree("agree_after_pending", expect_rows=41)
            if kind == "mor":
                t.agree("read_optimized_after_pending", ["--meta", "--read-optimized"],
                        {"meta": True, "read_optimized": True})
            t.spark_lists("spark_timeline_lists_pending_completed", pend["instant"])
            t.validates("validate_after_pending")
            stage.java_validates(f"{t.name}/java_mdt_listing_after_pending", t.path)

    # 4. (merge-on-read) Spark schedules a compaction, arbor executes it: `arbor compact --pending`
    if kind != "mor":
        return
    comp = {}

    def schedule_compaction():
        t.arbor_write(awkward_rows(range(40, 44), 9))
        before = set(pending_compactions(t.path))
        r = t.sql(f"CALL run_compaction(op => 'schedule', table => '{t.name}')")
        new = sorted(set(pending_compactions(t.path)) - before)
        require(len(new) == 1, f"Spark's schedule left pending compactions {new} (procedure rows "
                               f"{dumps(r['rows'])[:600]}); timeline {timeline_files(t.path)[-6:]}")
        comp["instant"] = new[0]
        t.before = t.spark_view()
        return {"instant": new[0], "procedure": r["rows"][:5]}
    if t.check("spark_schedules_compaction", schedule_compaction):
        def run_compaction():
            inst = comp["instant"]
            doc = stage.arbor.json("compact", t.path, "--pending")
            ran = [c for c in doc.get("compactions", []) if c.get("instant") == inst]
            require(ran, f"arbor compact --pending did not report running {inst}: {dumps(doc)[:1500]}")
            entry = [e for e in stage.arbor.timeline(t.path) if e["timestamp"] == inst]
            require(entry and entry[0]["action"] == "commit",
                    f"arbor's timeline shows {entry} for Spark's compaction {inst}")
            require(not pending_compactions(t.path), f"still pending: {pending_compactions(t.path)}")
            return {"instant": inst, "report": ran[0]}
        if t.check("arbor_runs_spark_compaction", run_compaction):
            t.same_rows_as_before("spark_same_rows_after_spark_compaction", "arbor's run of Spark's compaction")
            t.agree("agree_after_spark_compaction", expect_rows=41)
            t.validates("validate_after_spark_compaction")


# ------------------------------------------------------------------------------------------------
# Part 2: Spark's tables

SPARK_DDL = "id STRING, city STRING, fare DOUBLE, n BIGINT, amount DECIMAL(10,2), ts TIMESTAMP, note STRING"


def spark_row(i, n):
    return {"id": f"s{i:03d}", "city": ["la", "nyc", "sf"][i % 3], "fare": (i * 7 % 13) + n / 4, "n": n,
            "amount": decimal.Decimal(f"{i}.{n:02d}"),
            "ts": datetime.datetime(2024, 2, 1 + i % 28, i % 24, n, tzinfo=datetime.timezone.utc),
            "note": None if i % 3 == 0 else f"spark {i} {n}"}


def part2(stage, kind):
    t = Table(stage, f"cluster_spark_{kind}", kind)
    opts = {"hoodie.table.name": t.name,
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if kind == "mor" else "COPY_ON_WRITE",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.precombine.field": "n",
            "hoodie.parquet.small.file.limit": "0"}  # every insert its own file groups

    def write(rows, op):
        stage.spark_write(t.path, rows, SPARK_DDL, dict(opts, **{"hoodie.datasource.write.operation": op}))

    def build():
        write([spark_row(i, 1) for i in range(0, 9)], "insert")
        write([spark_row(i, 2) for i in range(9, 18)], "insert")
        write([spark_row(i, 3) for i in range(18, 27)], "insert")
        if kind == "mor":
            write([spark_row(i, 4) for i in (1, 2, 10, 20)], "upsert")
        groups = file_groups_per_partition(t.path)
        require(all(n >= 3 for n in groups.values()), f"file groups per partition: {groups}")
        return {"file_groups": groups, "timeline": timeline_files(t.path)[-4:]}
    if not t.check("spark_build", build):
        return
    t.remember_spark_rows()
    t.agree("agree_before")
    res = t.cluster("cluster", "--sort-by", "fare", sorted_by="fare")
    inst = res.get("instant")
    t.same_rows_as_before("spark_same_rows_after_cluster", "arbor's clustering")
    t.agree("agree_after_cluster", expect_rows=27)
    if kind == "mor":
        t.agree("read_optimized_after_cluster", ["--meta", "--read-optimized"], {"meta": True, "read_optimized": True})
    if inst:
        t.spark_lists("spark_timeline_lists_replacecommit", inst)

    def service(statement):
        def fn():
            r = t.sql(statement)
            return {"rows": r["rows"][:5], "timeline_tail": t.timeline_tail(4)}
        return fn
    t.check("spark_run_clean", service(f"CALL run_clean(table => '{t.name}', retain_commits => 1)"))
    # a Spark upsert into arbor's file groups: Java schedules neither a clustering nor a clean
    # without a commit since its last one (arbor's replacecommit counts as the last clustering)
    t.check("spark_upsert", lambda: write([spark_row(i, 5) for i in (0, 13)], "upsert") or
            {"timeline_tail": t.timeline_tail(3)})
    # sort columns: Java plans the (single) file groups arbor's clustering wrote; a planner that
    # missed arbor's replacecommit would plan the replaced ones too (duplicate rows)
    t.check("spark_run_clustering", service(f"CALL run_clustering(table => '{t.name}', order => 'n')"))
    t.agree("agree_after_spark_services", expect_rows=27)
    t.check("spark_run_clean_again", service(f"CALL run_clean(table => '{t.name}', retain_commits => 1)"))

    def replaced_cleaned():
        on_disk = data_files(t.path)
        left = sorted(f"{p}/{fid}" for p, fid in res.get("replaced", ()) if fid in on_disk.get(p, {}))
        require(res.get("replaced"), "arbor's clustering did not run")
        require(not left, f"file groups arbor's replacecommit {inst} replaced are still on storage after two Java "
                          f"cleans: {left}; timeline {timeline_files(t.path)[-8:]}")
        return {"replaced_file_groups_removed": len(res["replaced"])}
    t.check("java_clean_removed_replaced_file_groups", replaced_cleaned)
    t.agree("agree_after_clean", expect_rows=27)
    stage.java_validates(f"{t.name}/java_mdt_listing_after_clean", t.path)
    t.validates("validate_after_spark_services")


# ------------------------------------------------------------------------------------------------
# Part 3: log compaction of an arbor table

OPTIMIZED_SCAN = {"hoodie.optimized.log.blocks.scan.enable": "true"}


def java_log_scan(stage, path, partition, names, latest):
    """Java's merged log-record scanner (HoodieMergedLogRecordScanner) over the log files `names`
    of one file slice up to instant `latest`, with the optimized scan (compacted blocks stand in
    for the blocks they name; Hudi 1.2 has no other): {record key: "deleted" or [commit time, n]}."""
    from py4j.protocol import Py4JError

    spark = stage.spark.spark
    jvm = spark._jvm
    H = jvm.org.apache.hudi
    conf = H.storage.hadoop.HadoopStorageConfiguration(spark.sparkContext._jsc.hadoopConfiguration())
    mc = H.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(path).build()
    resolver = H.common.table.TableSchemaResolver(mc)
    files = jvm.java.util.ArrayList()
    for n in names:
        files.add("file:" + os.path.join(path, partition, n))
    b = (H.common.table.log.HoodieMergedLogRecordScanner.newBuilder().withStorage(mc.getStorage()).withBasePath(path)
         .withLogFilePaths(files).withLatestInstantTime(latest).withMaxMemorySizeInBytes(jvm.java.lang.Long(1 << 27))
         .withBufferSize(16384).withSpillableMapBasePath(os.path.join(stage.work, "spill")).withPartition(partition)
         .withTableMetaClient(mc))
    if tuple(int(x) for x in minor_of(stage.hudi).split(".")) >= (1, 2):
        schema = resolver.getTableSchema()
        b = b.withReaderSchema(schema)
        avro = schema.toAvroSchema()
    else:
        avro = resolver.getTableAvroSchema()
        b = b.withReaderSchema(avro).withOptimizedLogBlocksScan(True)
    scanner = b.build()
    try:
        recs = scanner.getRecords()
        out = {}
        for k in recs.keySet():
            r = recs.get(k)
            data = None if "Empty" in r.getClass().getName() else r.getData()
            if data is not None:
                try:  # a payload (HoodieAvroRecord), else the record itself (HoodieAvroIndexedRecord)
                    v = data.getInsertValue(avro)
                    data = v.get() if v.isPresent() else None
                except Py4JError:
                    pass
            out[str(k)] = "deleted" if data is None else [str(data.get("_hoodie_commit_time")), data.get("n")]
        return out
    finally:
        scanner.close()


def part3(stage):
    """arbor's merge-on-read table with the awkward columns and the indexes of part 1: a bulk
    insert (a file group per partition), three upserts of the same keys (one with a lower ordering
    value, which loses) and a delete (every file group then has four log files; a deleted key
    comes back in a new file group); `arbor compact --log --threshold 2` gives each slice one
    compacted log file. Spark reads the same rows as before, also with Java's optimized log-block
    scan (which reads the compacted block instead of the blocks it names), and as arbor; a Spark
    upsert afterwards goes into logs after the compacted one."""
    t = Table(stage, "logcompact_mor", "mor")

    def build():
        create = ["--op", "bulk-insert", "--type", "mor", "--key", "id", "--partition-by", "city", "--ordering", "n",
                  "--table-version", stage.table_version]
        t.arbor_write(awkward_rows(range(0, 12), 1), *create)
        stage.arbor("index", "create", t.path, "--column-stats", "--partition-stats")
        stage.arbor("index", "create", t.path, "--record-index")
        t.arbor_write(awkward_rows(range(0, 12), 2), "--op", "upsert")
        t.arbor_write(awkward_rows(range(0, 6), 3), "--op", "upsert")
        t.arbor_write(awkward_rows([7, 8, 9], 5), "--op", "delete")
        t.arbor_write(awkward_rows([0, 1, 2, 10, 11], 4) + awkward_rows([3], 0) + awkward_rows([7], 6),
                      "--op", "upsert")
        logs = log_files(t.path)
        few = {f"{p}/{fid}": len(fs) for (p, fid), fs in logs.items() if fs and len(fs) < 3}
        require(sum(1 for fs in logs.values() if len(fs) >= 3) >= 3 and not few,
                f"log files per file group: {dict((f'{p}/{fid}', len(fs)) for (p, fid), fs in logs.items())}")
        return {"log_files": {f"{p}/{fid[:8]}": len(fs) for (p, fid), fs in sorted(logs.items())}}
    if not t.check("build", build):
        return
    t.agree("agree_before", expect_rows=10)
    t.remember_spark_rows()
    lc = {}

    def log_compact():
        before = log_files(t.path)
        doc = stage.arbor.json("compact", t.path, "--log", "--threshold", 2)
        runs = doc.get("compactions") or []
        require(len(runs) == 1 and runs[0].get("instant"), f"arbor compact --log printed {dumps(doc)[:1500]}")
        inst = runs[0]["instant"]
        lc["instant"] = inst
        req, inflight, done = logcompaction_files(t.path, inst)
        require(req and inflight == 0 and done,
                f"timeline files of {inst}: requested {req}, inflight size {inflight}, completed {done}; "
                f"timeline {timeline_files(t.path)[-6:]}")
        entry = [e for e in stage.arbor.timeline(t.path) if e["timestamp"] == inst]
        require(entry and entry[0]["action"] == "deltacommit" and entry[0].get("operation") == "LOG_COMPACT",
                f"arbor's timeline shows {entry} for {inst}")
        after = log_files(t.path)
        compacted = sorted(f"{p}/{fid}" for (p, fid), fs in before.items() if len(fs) >= 2)
        new = {f"{p}/{fid}": sorted(set(fs) - set(before.get((p, fid), []))) for (p, fid), fs in after.items()}
        require(all(len(new[g]) == 1 and log_instant(new[g][0]) == inst for g in compacted)
                and not any(fs for g, fs in new.items() if g not in compacted),
                f"expected one new log file of {inst} in each of {compacted}: {new}")
        require(all(set(before[k]) <= set(after.get(k, [])) for k in before), "log compaction removed log files")
        return {"instant": inst, "completed": done, "file_groups": len(runs[0].get("groups", [])),
                "records": [g.get("records") for g in runs[0].get("groups", [])],
                "new_log_files": {g: fs[0] for g, fs in new.items() if fs}}
    if not t.check("log_compact", log_compact):
        return
    t.same_rows_as_before("spark_same_rows_after", "arbor's log compaction")
    t.same_rows_as_before("spark_optimized_scan_same_rows", "arbor's log compaction (optimized log-block scan)",
                          options=OPTIMIZED_SCAN)
    t.agree("agree_after", expect_rows=10)

    def java_scan():
        require(t.before is not None, "Spark's read before did not succeed")
        before = {r["id"]: r for r in t.before["rows"]}
        detail = {}
        for (part, fid), names in sorted(log_files(t.path).items()):
            if not any(log_instant(n) == lc["instant"] for n in names):
                continue
            got = java_log_scan(stage, t.path, part, names, lc["instant"])
            live = sorted(k for k, r in before.items() if r["_hoodie_file_name"].startswith(fid))
            bad = []
            for k, v in sorted(got.items()):
                r = before.get(k)
                if v == "deleted":
                    if r is not None and r["_hoodie_file_name"].startswith(fid):
                        bad.append(f"{k}: a delete, Spark read {r['_hoodie_commit_time']} n={r['n']} before")
                elif r is None or [r["_hoodie_commit_time"], r["n"]] != v:
                    bad.append(f"{k}: commit time, n {v}, Spark read "
                               f"{None if r is None else [r['_hoodie_commit_time'], r['n']]} before")
            missing = [k for k in live if k not in got]
            require(not bad and not missing, f"{part}/{fid}: Java's optimized scan of {names}: {bad}; "
                                             f"keys Spark read in the slice before, not scanned: {missing}")
            detail[f"{part}/{fid[:8]}"] = {k: v for k, v in sorted(got.items())}
        require(detail, f"no file slice with a log file of {lc['instant']}")
        return detail
    t.check("java_optimized_log_scan", java_scan)
    t.agree("read_optimized_after", ["--meta", "--read-optimized"], {"meta": True, "read_optimized": True})
    t.validates("validate_after")

    # a Spark upsert after the log compaction: new log files after the compacted one
    wrote = {}

    def upsert():
        wrote["rows"] = spark_upsert(t, ["k000", "k001", "k003", "k005"], 10, "k901")
        logs = sorted(f for fs in log_files(t.path).values() for f in fs if log_instant(f) > lc["instant"])
        require(logs, f"Spark's upsert wrote no log file after the log compaction: timeline {t.timeline_tail(3)}")
        return {"rows": len(wrote["rows"]), "timeline_tail": t.timeline_tail(3), "spark_log_files": logs}
    if t.check("spark_upsert", upsert):
        t.agree("agree_after_spark_upsert", expect_rows=11)
        t.agree("agree_optimized_scan_after_spark_upsert", spark={"meta": True, "options": OPTIMIZED_SCAN},
                expect_rows=11)

        check_arbor_reads_spark_values(stage, t, wrote["rows"])
        t.validates("validate_after_spark_upsert")


def run(stage):
    for kind in ("cow", "mor"):
        part1(stage, kind)
    for kind in ("cow", "mor"):
        part2(stage, kind)
    part3(stage)
