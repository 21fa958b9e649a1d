"""Spark writes and runs its table services on arbor's tables, and arbor carries on (issue 34
item 3).

One table per type (cow, mor), created by arbor (`--key id --partition-by city --ordering n`, the
stage's table version, metadata table on) with a few writes of history, then a sequence of steps,
each by Spark (one SparkSession for the whole stage):

  before any publication   A1 upsert, A2 delete, A3 insert_overwrite (partition la)
  after a publication      B1 upsert, B2 delete, B3 insert_overwrite (partition nyc)
  table services (SQL CALL on the table registered with CREATE TABLE ... USING hudi LOCATION)
                           S1 run_compaction schedule + run (mor), S2 run_clustering,
                           S3 run_clean, S4 run_ttl (then the DELETE_PARTITION replacecommit TTL
                           writes, by a delete_partition write), S5 archive_commits,
                           S6 create_savepoint, S7 rollback_to_savepoint (the arbor tags taken
                           after the savepoint dropped first: Hudi restores past no savepoint)
  the hazard, last         S8 rollback_to_savepoint past an arbor tag: Hudi refuses part-way;
                           then arbor tag drop (else Hudi's delete_savepoint) and a second try

Spark writes with the table's own key, partition and ordering fields (read from
hoodie.properties), `hoodie.write.auto.upgrade=false` and Hudi's single-writer defaults (no
concurrency mode, lock provider or OCC options).

After every step (`carry_on`): arbor and Spark read the same rows, equal to the rows the step
should have left (a Python model of the table), `arbor validate` passes, no Hadoop `.crc`
sidecar is stale; then arbor upserts on main and tags that write, branches, writes on the branch
and publishes it (`--drop`), and Spark reads main, the new tag (time travel to the tag's
instant) and a filtered read with data skipping identically to arbor (A1 and A2 stop before the
branch, so A1-A3 are Spark writes on a table that was never published). Around S1/S2 a branch
is cut before the service and published after it (a branch older than a Java table service).
After S3, S5 and S7 every tag is read again by both (Spark's refusal to time-travel before the
last clean's earliest retained commit is recorded, not failed: Hudi's guard ignores savepoints).

Check ids: writes/<type>/<step>/<what>. Environment: ARBOR_SPARK_WRITES_TYPES (default: one type
per Hudi version, 1.0 cow, 1.1 mor, 1.2 cow; both with ARBOR_SPARK_FULL=1), ARBOR_SPARK_WRITES_STOP_AT=<step> (leave each table as it is before <step>).
Times: about 9 minutes per Hudi version alone on the 2-core machine (about 300 checks, 7 Spark
DataFrame writes and 10-12 SQL CALLs per table); 20 minutes each with three versions at once.
"""

import copy
import json
import os
import zlib

from canonical_rows import dumps
from spark_stage_lib import CheckFailed, ToolError, error_text, require, table_properties, table_types

SCHEMA = "id STRING, city STRING, fare DOUBLE, n BIGINT"
HEADER = ["id", "city", "fare", "n"]


def stale_crcs(table):
    """Hadoop LocalFileSystem `.<name>.crc` sidecars that no longer match their file (Java's
    ChecksumFileSystem then refuses the file: "Could not load Hoodie properties" for
    hoodie.properties)."""
    out = []
    for root, _, files in os.walk(table):
        for f in files:
            if not (f.startswith(".") and f.endswith(".crc")):
                continue
            target = os.path.join(root, f[1:-4])
            if not os.path.exists(target):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                raw = fh.read()
            if raw[:4] != b"crc\0":
                continue
            bpc = int.from_bytes(raw[4:8], "big")
            with open(target, "rb") as fh:
                data = fh.read()
            sums = b"".join(zlib.crc32(data[i:i + bpc]).to_bytes(4, "big") for i in range(0, len(data), bpc))
            if sums != raw[8:]:
                out.append(os.path.relpath(os.path.join(root, f), table))
    return sorted(out)


def foreign_mdt_base_files(path):
    """Base files of main's metadata table (hfile/parquet under .hoodie/metadata/<partition>/)
    whose instant is not on main's MDT timeline and is newer than its oldest active instant: a
    working branch's MDT compaction output, which shares the directory. Hudi's file-system view
    groups main's later MDT log files into that (to main uncommitted) slice and drops them."""
    mdt = os.path.join(path, ".hoodie", "metadata")
    if not os.path.isdir(mdt):
        return []
    tpath = table_properties(mdt).get("hoodie.timeline.path", "timeline")
    tl = os.path.join(mdt, ".hoodie", tpath)
    instants = {f.split(".")[0].split("_")[0] for f in os.listdir(tl) if f[:1].isdigit()} if os.path.isdir(tl) else set()
    if not instants:
        return []
    oldest = min(instants)
    out = []
    for part in sorted(os.listdir(mdt)):
        d = os.path.join(mdt, part)
        if part == ".hoodie" or not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.startswith(".") or not f.endswith((".hfile", ".parquet")):
                continue
            inst = f.rsplit(".", 1)[0].rsplit("_", 1)[-1]
            if inst not in instants and inst > oldest:
                out.append(f"{part}/{f}")
    return out


def row_key(r):
    return (r["id"], r["city"], round(float(r["fare"]), 6), int(r["n"]))


class Table:
    """One arbor table of one type, driven through the whole sequence."""

    def __init__(self, stage, kind):
        self.stage = stage
        self.arbor = stage.arbor
        self.kind = kind
        # not stage.path(): hoodie.table.name is the directory name, and Spark builds Avro names from it
        self.path = os.path.join(stage.work, f"writes_{kind}")
        self.name = f"writes_{kind}_{stage.table_version}"
        self.seq = 0
        self.model = {}  # id -> {"id", "city", "fare", "n"}: the rows main should hold
        self.tags = {}  # tag name -> (instant, model snapshot)
        self.step = None
        self.step_start = 1

    # -- helpers ----------------------------------------------------------------------------
    def next_n(self):
        self.seq += 1
        return self.seq

    def begin(self, step):
        if os.environ.get("ARBOR_SPARK_WRITES_STOP_AT") == step:
            raise StopIteration(step)
        self.step = step
        self.step_start = self.seq + 1

    def cid(self, what):
        return f"{self.kind}/{self.step}/{what}"

    def check(self, what, fn):
        return self.stage.check(self.cid(what), fn)

    def rows(self, specs):
        """[(id, city)] -> rows with a fresh ordering value each (so every write wins)."""
        out = []
        for key, city in specs:
            n = self.next_n()
            out.append({"id": key, "city": city, "fare": n + 0.25, "n": n})
        return out

    def apply_upsert(self, model, rows):
        for r in rows:
            model[r["id"]] = dict(r)

    def arbor_write(self, rows, *extra):
        path = self.arbor.csv(HEADER, [(r["id"], r["city"], r["fare"], r["n"]) for r in rows])
        return self.arbor.write(self.path, path, *extra)

    def write_options(self, op):
        p = table_properties(self.path)
        ordering = p.get("hoodie.table.ordering.fields") or p.get("hoodie.table.precombine.field")
        opts = {
            "hoodie.datasource.write.operation": op,
            "hoodie.datasource.write.table.type": p["hoodie.table.type"],
            "hoodie.datasource.write.recordkey.field": p["hoodie.table.recordkey.fields"],
            "hoodie.datasource.write.partitionpath.field": p["hoodie.table.partition.fields"],
            "hoodie.datasource.write.precombine.field": ordering,
            "hoodie.datasource.write.hive_style_partitioning": p.get("hoodie.datasource.write.hive_style_partitioning", "false"),
            "hoodie.write.auto.upgrade": "false",
        }
        require((opts["hoodie.datasource.write.recordkey.field"], opts["hoodie.datasource.write.partitionpath.field"],
                 ordering) == ("id", "city", "n"), f"unexpected table definition in hoodie.properties: {opts}")
        return opts

    def spark_write(self, what, op, rows, extra=None, on_ok=None):
        def fn():
            opts = self.write_options(op)
            opts.update(extra or {})
            r = self.stage.spark_write(self.path, rows, SCHEMA, opts)
            if on_ok:
                on_ok()
            return {"operation": op, "rows": r["rows_written"], "timeline_tail": self.timeline_tail(3)}
        return self.check(what, fn)

    def sql(self, what, *statements, on_ok=None, known=None, expect_error=None):
        """Spark SQL statements as check `what`. `known`: {substring: note} of upstream Hudi
        failures that pass with the note recorded (each one reproduced on a table Spark wrote
        itself); `expect_error`: a substring the statement's error must contain (the check
        fails when the statement succeeds)."""
        def fn():
            try:
                r = self.stage.spark_sql(*statements)
            except Exception as e:  # noqa: BLE001 (matched against known and expected errors)
                text = error_text(e)
                if expect_error and expect_error in text:
                    return {"refused": text[:600], "timeline_tail": self.timeline_tail(6)}
                for sub, note in (known or {}).items():
                    if sub in text:
                        return {"known_hudi_failure": note, "error": text[:600], "timeline_tail": self.timeline_tail(4)}
                raise
            require(not expect_error, f"expected a refusal ({expect_error!r}); Spark returned {dumps(r['rows'][:5])}")
            if on_ok:
                on_ok(r)
            return {"rows": r["rows"][:20], "timeline_tail": self.timeline_tail(4)}
        return self.check(what, fn)

    def timeline(self):
        return self.arbor.timeline(self.path, "--all")

    def timeline_tail(self, n):
        try:
            return [f"{e['timestamp']} {e['action']} {e.get('state')}" + (f" {e['operation']}" if e.get("operation") else "")
                    for e in self.timeline()[-n:]]
        except (ToolError, ValueError) as e:
            return f"arbor timeline failed: {e}"

    def head(self):
        """main's latest completed write (commit, deltacommit or replacecommit)."""
        done = [e for e in self.arbor.timeline(self.path) if e.get("state", "COMPLETED") == "COMPLETED"]
        return done[-1]["timestamp"]

    # -- comparisons -------------------------------------------------------------------------
    def agree(self, what, arbor_args=(), spark=None, model=None, where=None):
        """Spark's read and arbor's read of the same view have the same rows, and those are the
        model's (`model`: rows expected; default the current model; `where`: (column, value) for
        a `column >= value` filter on both reads and on the model)."""
        spark = dict(spark or {})
        expected = self.model if model is None else model

        def fn():
            args = list(arbor_args)
            exp = list(expected.values())
            if where:
                col, v = where
                args += ["--where", f"{col} >= {v}"]
                spark["where"] = f"{col} >= {v}"
                exp = [r for r in exp if r[col] >= v]
            a = self.arbor.view(self.path, args)
            require("error" not in a, f"arbor read {' '.join(args)} failed: {a.get('error')}")
            s = self.stage.spark_read(self.path, **spark)
            problems = []
            if s["data_sha256"] != a["data_sha256"]:
                only_s = [r for r in s["rows"] if r not in a["rows"]][:5]
                only_a = [r for r in a["rows"] if r not in s["rows"]][:5]
                problems.append(f"Spark and arbor differ: spark {s['row_count']} rows, arbor {a['row_count']}; "
                                f"only spark: {dumps(only_s)[:1200]}; only arbor: {dumps(only_a)[:1200]}")
            want = sorted(row_key(r) for r in exp)
            got = sorted(row_key(r) for r in a["rows"])
            if want != got:
                problems.append(f"arbor's rows are not the expected ones: missing {sorted(set(want) - set(got))[:6]}, "
                                f"unexpected {sorted(set(got) - set(want))[:6]}")
            if problems:
                raise CheckFailed(" | ".join(problems) + " | " + dumps(self.diagnose(spark))[:1500])
            return {"rows": a["row_count"]}

        return self.check(what, fn)

    def diagnose(self, spark):
        """What Spark reads without the metadata table and read-optimized, and main's timeline
        tail, for a failed comparison."""
        out = {}
        for label, req in (("spark_without_mdt", {"options": {"hoodie.metadata.enable": "false"}}),
                           ("spark_read_optimized", {"read_optimized": True})):
            try:
                req = dict(spark, **req) if label == "spark_without_mdt" else dict(req, as_of=spark.get("as_of"))
                req = {k: v for k, v in req.items() if v is not None}
                out[label] = self.stage.spark_read(self.path, rows=False, **req)["row_count"]
            except Exception as e:  # noqa: BLE001 (diagnostics only)
                out[label] = f"failed: {str(e).splitlines()[0][:200]}"
        out["timeline_tail"] = self.timeline_tail(6)
        return out

    def validates(self, what):
        def fn():
            v = self.arbor.validate(self.path)
            require(v["ok"], f"arbor validate failed: {dumps(v)[:2500]}")
        return self.check(what, fn)

    def no_stale_crc(self, what):
        def fn():
            found = stale_crcs(self.path)
            require(not found, f"stale Hadoop .crc sidecars: {found}")
        return self.check(what, fn)

    def tags_read(self, what):
        """Every tag taken so far: arbor reads its snapshot (the model when it was taken) and
        Spark's time travel to its instant reads the same rows."""
        def fn():
            bad, ok, guarded = [], 0, []
            for name, (inst, model) in self.tags.items():
                a = self.arbor.view(self.path, ["--tag", name])
                if "error" in a:
                    bad.append(f"{name}: arbor read failed: {a['error']}")
                    continue
                if sorted(row_key(r) for r in a["rows"]) != sorted(row_key(r) for r in model.values()):
                    bad.append(f"{name}: arbor's rows are not the tagged ones")
                try:
                    s = self.stage.spark_read(self.path, as_of=inst)
                    if s["data_sha256"] != a["data_sha256"]:
                        bad.append(f"{name} ({inst}): Spark {s['row_count']} rows, arbor {a['row_count']}")
                    else:
                        ok += 1
                except Exception as e:  # noqa: BLE001 (each tag's failure is reported)
                    text = str(e).splitlines()[0][:300]
                    if "Cleaner cleaned up the timestamp of interest" in text:
                        # Hudi's time-travel guard (TimelineUtils.validateTimestampAsOf) refuses an
                        # instant before the last clean's earliest retained commit, savepoint or not
                        guarded.append(name)
                    else:
                        bad.append(f"{name} ({inst}): Spark read failed: {text}")
            require(not bad, "; ".join(bad))
            return {"tags_read_by_both": ok, "spark_refused_before_last_clean": guarded}
        return self.check(what, fn)

    # -- the carry-on after each step --------------------------------------------------------
    def carry_on(self, publish=True):
        """Arbor reads what the step left identically to Spark, validates, writes, tags,
        branches and publishes on top; Spark reads the result identically."""
        self.no_stale_crc("no_stale_crc")
        self.agree("agree")
        self.validates("validate")
        step = self.step

        def write_and_tag():
            keep = sorted(self.model)[0] if self.model else None
            specs = [(f"{step}_m", "sf")] + ([(keep, self.model[keep]["city"])] if keep else [])
            rows = self.rows(specs)
            inst = self.arbor_write(rows)
            self.apply_upsert(self.model, rows)
            tag = f"t_{self.kind}_{step}"
            self.arbor("tag", "create", self.path, tag, "--instant", inst)
            self.tags[tag] = (inst, copy.deepcopy(self.model))
            return {"instant": inst, "tag": tag}
        wrote = self.check("arbor_upsert_and_tag", write_and_tag)
        if publish:
            def branch_publish():
                b = f"b_{step}"
                self.arbor("branch", "create", self.path, b)
                rows = self.rows([(f"{step}_b", "nyc")] + [(k, self.model[k]["city"]) for k in sorted(self.model)[-1:]])
                inst = self.arbor_write(rows, "--branch", b)
                r = self.arbor("branch", "publish", self.path, b, "--drop", "--json", check=False)
                if r.returncode != 0:
                    raise CheckFailed(f"arbor branch publish {b} refused: {(r.stderr or r.stdout).strip()[-1500:]}")
                self.apply_upsert(self.model, rows)
                return {"branch_write": inst, "publication": json.loads(r.stdout)}
            self.check("branch_publish", branch_publish)
        self.agree("spark_reads_main")
        if wrote:
            tag = f"t_{self.kind}_{step}"
            inst, model = self.tags[tag]
            self.agree("spark_reads_tag", ["--tag", tag], spark={"as_of": inst}, model=model)
        self.agree("filtered_read_skipping", where=("n", self.step_start),
                   spark={"options": {"hoodie.enable.data.skipping": "true", "hoodie.metadata.enable": "true"}})
        self.validates("validate_after")

    # -- pre-branch around a service ---------------------------------------------------------
    def pre_branch(self):
        """A branch cut before the service, with one arbor write; returns its rows or None."""
        b = f"pre_{self.step}"
        out = {}

        def fn():
            self.arbor("branch", "create", self.path, b)
            rows = self.rows([(f"{self.step}_pre", "la")])
            out["instant"] = self.arbor_write(rows, "--branch", b)
            out["rows"] = rows
            return {"branch": b, "instant": out["instant"],
                    "branch_mdt_base_files_in_mains_mdt": foreign_mdt_base_files(self.path)}
        self.check("pre_branch", fn)
        return out.get("rows")

    def publish_pre_branch(self, rows):
        b = f"pre_{self.step}"

        def fn():
            require(rows is not None, "the branch was not created")
            r = self.arbor("branch", "publish", self.path, b, "--drop", "--json", check=False)
            if r.returncode != 0:
                raise CheckFailed(f"arbor branch publish {b} (cut before the Spark service) refused: "
                                  f"{(r.stderr or r.stdout).strip()[-1500:]}; main's metadata partitions: "
                                  f"{table_properties(self.path).get('hoodie.table.metadata.partitions')}")
            self.apply_upsert(self.model, rows)
            return json.loads(r.stdout)
        self.check("publish_branch_cut_before_service", fn)


def run(stage):
    default = ",".join(table_types(stage, "writes"))
    for kind in os.environ.get("ARBOR_SPARK_WRITES_TYPES", default).split(","):
        try:
            run_table(stage, Table(stage, kind))
        except StopIteration:  # ARBOR_SPARK_WRITES_STOP_AT=<step>: leave the table before that step
            pass


def run_table(stage, t):
    a = stage.arbor
    # ---- setup: arbor creates the table and writes some history (instants archival may move)
    t.begin("setup")

    def setup():
        rows = t.rows([("k1", "sf"), ("k2", "sf"), ("k3", "nyc"), ("k4", "nyc"), ("k5", "la"), ("k6", "la"),
                       ("k7", "chi"), ("k8", "chi")])
        t.arbor_write(rows, "--op", "insert", "--type", t.kind, "--key", "id", "--partition-by", "city",
                      "--ordering", "n", "--table-version", stage.table_version)
        t.apply_upsert(t.model, rows)
        for specs in ([("k1", "sf"), ("k3", "nyc")], [("k5", "la"), ("k9", "sf")], [("k2", "sf"), ("k7", "chi")]):
            rows = t.rows(specs)
            t.arbor_write(rows)
            t.apply_upsert(t.model, rows)
        return {"path": t.path, "metadata_partitions": table_properties(t.path).get("hoodie.table.metadata.partitions")}
    if not t.check("create", setup):
        return
    t.agree("agree")
    t.validates("validate")
    t.check("register", lambda: stage.spark_sql(f"CREATE TABLE IF NOT EXISTS {t.name} USING hudi LOCATION '{t.path}'") and None)

    # ---- A: Spark writes on a table arbor created that was never published
    t.begin("A1_upsert")
    rows = t.rows([("k1", "sf"), ("k10", "nyc")])
    t.spark_write("spark", "upsert", rows, on_ok=lambda: t.apply_upsert(t.model, rows))
    t.check("mdt_partitions", lambda: {"after_spark": table_properties(t.path).get("hoodie.table.metadata.partitions")})
    t.carry_on(publish=False)

    t.begin("A2_delete")
    victim = t.model.get("k2") or next(iter(t.model.values()))
    drows = t.rows([(victim["id"], victim["city"])])
    t.spark_write("spark", "delete", drows, on_ok=lambda: t.model.pop(victim["id"], None))
    t.carry_on(publish=False)

    t.begin("A3_insert_overwrite")
    orows = t.rows([("k11", "la"), ("k12", "la")])

    def overwrite(part, rows):
        for k in [k for k, r in t.model.items() if r["city"] == part]:
            del t.model[k]
        t.apply_upsert(t.model, rows)
    t.spark_write("spark", "insert_overwrite", orows, on_ok=lambda: overwrite("la", orows))
    t.carry_on(publish=True)

    # ---- B: the same after a publication
    t.begin("B1_upsert")
    rows_b1 = t.rows([("k3", "nyc"), ("k13", "sf")])
    t.spark_write("spark", "upsert", rows_b1, on_ok=lambda: t.apply_upsert(t.model, rows_b1))
    t.carry_on()

    t.begin("B2_delete")
    victim2 = t.model.get("k13") or next(iter(t.model.values()))
    drows2 = t.rows([(victim2["id"], victim2["city"])])
    t.spark_write("spark", "delete", drows2, on_ok=lambda: t.model.pop(victim2["id"], None))
    t.carry_on()

    t.begin("B3_insert_overwrite")
    orows2 = t.rows([("k14", "nyc"), ("k3", "nyc")])
    t.spark_write("spark", "insert_overwrite", orows2, on_ok=lambda: overwrite("nyc", orows2))
    t.carry_on()

    # ---- S: Spark's table services through SQL CALL
    name = t.name
    if t.kind == "mor":
        t.begin("S1_compaction")
        pre = t.pre_branch()
        before = len(t.timeline())

        def compacted(r):
            new = t.timeline()[before:]
            require(any(e["action"] == "commit" and e.get("state", "COMPLETED") == "COMPLETED" for e in new),
                    f"no completed compaction commit on main's timeline; new instants: {new}")
        t.sql("spark", "SET hoodie.compact.inline.max.delta.commits=1",
              f"CALL run_compaction(op => 'schedule', table => '{name}')")
        t.sql("spark_run", f"CALL run_compaction(op => 'run', table => '{name}')", on_ok=compacted)
        t.agree("agree_after_service")
        t.validates("validate_after_service")
        t.publish_pre_branch(pre)
        t.carry_on()

    t.begin("S2_clustering")
    pre = t.pre_branch()
    before = len(t.timeline())

    def clustered(r):
        new = t.timeline()[before:]
        require(any(e["action"] in ("replacecommit", "clustering") and e.get("state", "COMPLETED") == "COMPLETED"
                    for e in new), f"no completed clustering on main's timeline; new instants: {new}")
    t.sql("spark", f"CALL run_clustering(table => '{name}', order => 'id')", on_ok=clustered)
    t.agree("agree_after_service")
    t.validates("validate_after_service")
    t.publish_pre_branch(pre)
    t.carry_on()

    t.begin("S3_clean")
    # run_clean schedules only after hoodie.clean.max.commits (1) writes since the last clean:
    # the carry-on above wrote
    t.sql("spark", f"CALL run_clean(table => '{name}', retain_commits => 1)")
    t.tags_read("tags_after_clean")
    t.carry_on()

    t.begin("S4_ttl")
    t.sql("spark", f"CALL run_ttl(table => '{name}', retain_days => 1)", known={
        "replacecommit.inflight does not exist": "run_ttl with no expired partition fails after leaving a requested "
        "replacecommit (Hudi 1.1.1 and 1.2.0, also on a table Spark created and wrote itself; 1.0.2 returns no "
        "rows); arbor's next write rolls the requested instant back"})
    # KEEP_BY_TIME expires partitions last written more than retain_days (>= 1) ago: none here.
    # What a TTL run commits is a DELETE_PARTITION replacecommit; Spark writes that one directly
    t.spark_write("spark_delete_partition", "delete_partition", [],
                  extra={"hoodie.datasource.write.partitions.to.delete": "chi"},
                  on_ok=lambda: [t.model.pop(k) for k in [k for k, r in t.model.items() if r["city"] == "chi"]])
    t.carry_on()

    t.begin("S5_archive")
    counts = {}

    def archived_count():
        return sum(1 for e in t.timeline() if e.get("archived"))

    def archive(r):
        counts["after"] = archived_count()
    counts["before"] = archived_count()
    t.sql("spark", f"CALL archive_commits(table => '{name}', min_commits => 2, max_commits => 3, retain_commits => 1)",
          on_ok=archive)
    t.check("archived_instants", lambda: {"archived_before": counts.get("before"), "archived_after": counts.get("after"),
                                          "savepoints": [s["instant"] for s in json.loads(
                                              a("savepoint", "list", t.path, "--json").stdout)]})
    t.tags_read("tags_after_archive")
    t.carry_on()

    t.begin("S6_savepoint")
    sp = {}

    def savepoint(r):
        listed = [s["instant"] for s in json.loads(a("savepoint", "list", t.path, "--json").stdout)]
        require(sp["instant"] in listed, f"arbor savepoint list does not show Spark's savepoint {sp['instant']}: {listed}")
    try:
        sp["instant"] = t.head()
        sp["model"] = copy.deepcopy(t.model)
        sp["tags"] = set(t.tags)
    except (ToolError, ValueError, IndexError) as e:
        t.check("head", lambda e=e: (_ for _ in ()).throw(e))
    if "instant" in sp:
        t.sql("spark", f"CALL create_savepoint(table => '{name}', commit_time => '{sp['instant']}')", on_ok=savepoint)
    t.carry_on()

    t.begin("S7_rollback_to_savepoint")
    if "instant" in sp:
        later = [k for k in t.tags if k not in sp["tags"]]

        def drop_later():
            # Hudi restores only past no savepoint ("Delete savepoint first"); arbor's tags are
            # savepoint pairs (data and metadata timelines), released by arbor tag drop
            for k in later:
                a("tag", "drop", t.path, k)
                t.tags.pop(k)
            return {"dropped": later}
        t.check("drop_tags_after_savepoint", drop_later)

        def restored(r):
            t.model = copy.deepcopy(sp["model"])
        t.sql("spark", f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{sp['instant']}')", on_ok=restored)
        t.tags_read("tags_after_restore")
    t.carry_on()

    # ---- S8: Java's restore past an arbor tag (the hazard, at the end: it may leave the table stuck)
    t.begin("S8_restore_past_tag")
    s8 = {}

    def setup_s8():
        s8["savepoint"] = t.head()
        s8["model"] = copy.deepcopy(t.model)
        stage.spark_sql(f"CALL create_savepoint(table => '{name}', commit_time => '{s8['savepoint']}')")
        rows1 = t.rows([("S8_tagged", "sf")])
        s8["tagged"] = t.arbor_write(rows1)
        t.apply_upsert(t.model, rows1)
        a("tag", "create", t.path, "t_S8", "--instant", s8["tagged"])
        s8["after_tag_model"] = copy.deepcopy(t.model)
        rows2 = t.rows([("S8_last", "nyc")])
        s8["last"] = t.arbor_write(rows2)
        t.apply_upsert(t.model, rows2)
        return {k: v for k, v in s8.items() if "model" not in k}
    if not t.check("setup", setup_s8):
        return
    t.sql("spark_refuses_restore", f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{s8['savepoint']}')",
          expect_error="Could not rollback a savepointed commit")

    def after_refusal():
        v = t.arbor.view(t.path, [])
        state = {"arbor_read": v.get("error") or f"{v['row_count']} rows",
                 "rolled_back_newest_write": "error" not in v and not any(r["id"] == "S8_last" for r in v["rows"]),
                 "arbor_validate": t.arbor.validate(t.path),
                 "timeline_tail": t.timeline_tail(6)}
        return state
    t.check("state_after_refused_restore", after_refusal)

    def tag_drop():
        r = a("tag", "drop", t.path, "t_S8", check=False)
        require(r.returncode == 0, f"arbor tag drop t_S8 (what Hudi asks for before a restore) failed: "
                                   f"{(r.stderr or r.stdout).strip()[-800:]}")
        s8["dropped"] = True
    t.check("arbor_tag_drop_after_refused_restore", tag_drop)
    if s8.get("dropped"):
        def restored8(r):
            t.model = copy.deepcopy(s8["model"])
        t.sql("spark_restore_after_tag_drop",
              f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{s8['savepoint']}')", on_ok=restored8)
    else:
        # Hudi's own way out: delete the data-side savepoint, restore again. arbor's tag also
        # savepoints the metadata table, which Hudi's restore of the metadata table then refuses
        t.sql("spark_delete_savepoint_then_restore",
              f"CALL delete_savepoint(table => '{name}', instant_time => '{s8['tagged']}')",
              f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{s8['savepoint']}')",
              on_ok=lambda r: setattr(t, "model", copy.deepcopy(s8["model"])))
    t.tags.pop("t_S8", None)
    t.agree("agree")
    t.validates("validate")
    t.check("arbor_writes", lambda: {"instant": t.arbor_write(t.rows([("S8_after", "la")]))})

