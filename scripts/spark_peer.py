#!/usr/bin/env python3
"""arbor's Java peer: Apache Spark 3.5 with a Hudi Spark bundle (1.0.2, 1.1.x or 1.2.x), run as a
batch of checks in ONE local[2] SparkSession. Install with scripts/spark.sh and run with the
python it prints:

  PY=$(bash scripts/spark.sh | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["python"])')
  $PY scripts/spark_peer.py --hudi-version 1.1.1 < checks.jsonl > results.jsonl

Input: one JSON object a line (stdin, or --input FILE; blank lines and lines starting with # are
skipped). Output: one JSON line per check on stdout, in order; everything else (Spark's and
Hudi's logs, the JVM's stdout) goes to stderr. Every result has "id", "kind", "ok" and "seconds";
a failed check is {"id": .., "kind": .., "ok": false, "error": "ExceptionType: message"} and the
session goes on with the next check.

Check kinds:
  {"kind": "info"}
      spark and hudi versions, jars, and the seconds the JVM and session took to start.
  {"kind": "read", "path": DIR, "as_of": T, "incremental": [BEGIN, END],
   "read_optimized": true, "options": {K: V}, "meta": true, "rows": false, "columns": [..],
   "where": "SQL predicate"}
      A Hudi read (snapshot; as_of: time travel, option as.of.instant; incremental: query type
      incremental with begin/end instant time, END optional or null; read_optimized: query type
      read_optimized; options: any further read options, such as hoodie.metadata.enable or
      hoodie.enable.data.skipping). Returns row_count, data_sha256, rows_sha256 and schema,
      computed exactly as scripts/peer_digest.py and scripts/canonical_rows.py compute them (the
      rows go through Arrow, so the canonical values are the same functions'), and "rows": the
      canonical rows, sorted, without the _hoodie_* meta columns unless "meta" is true (omitted
      with "rows": false).
  {"kind": "sql", "statement": "...", "max_rows": 1000}
      spark.sql(statement), collected: "columns" and "rows" (canonical, in Spark's order) and
      "row_count". For CALL procedures, INSERT/UPDATE/DELETE/MERGE, CREATE TABLE ... USING hudi
      LOCATION '...'. "statements": [..] runs several in order and returns the last's rows.
  {"kind": "write", "path": DIR, "rows": [{..}, ..], "schema": "id STRING, n BIGINT, ...",
   "options": {hoodie.* write options}, "mode": "append" | "overwrite"}
      A DataFrame write with format hudi (hoodie.table.name defaults to the directory name).
  {"kind": "validate_mdt", "path": DIR, "method": M, "table": NAME, "args": [..], "verbose": false}
      Validates the metadata table against storage; returns "passed" (bool), "method", "message"
      and the method's details. Methods (default: validator when the utilities jar is cached,
      else listing):
        validator  HoodieMetadataTableValidator of hudi-utilities-slim-bundle through the JVM
                   gateway (--base-path DIR plus args, default --validate-latest-file-slices
                   --validate-latest-base-files --validate-all-file-groups)
        listing    the partitions and files Hudi's metadata-table reader lists
                   (CALL show_metadata_table_partitions / show_metadata_table_files) against a
                   listing of the local directory: "problems" (files the metadata table lists
                   that are missing, data files of completed or unknown instants it does not
                   list, partitions only on one side) and "notes" (files of pending instants)
        procedure  CALL validate_metadata_table_files (rows: the files that disagree, all with
                   "verbose": true). Caution: in 1.0.2-1.2.0 its file-system side repeats the
                   metadata table's listing, so it misses deleted and extra files.
      The table is registered in the session catalog as NAME (default arbor_mdt_<dir>).

Options: --hudi-version V (selects the jars of scripts/spark.sh's cache
.arbor-test/spark-jars/V/), --jars-json FILE (spark.sh's last line, instead of the cache),
--input FILE, --driver-memory (default 1g), --shuffle-partitions (default 2), --log-level
(default WARN).
Exit status: 0 when every line was answered (even with failed checks); 2 on usage errors or when
Spark could not start (then one {"ok": false} result line with id null says why).
"""

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from canonical_rows import META, column, dumps  # noqa: E402  (same directory)
from peer_digest import digest_table  # noqa: E402

OUT = None  # the real stdout; fd 1 is pointed at stderr so the JVM cannot write on it


def emit(doc):
    OUT.write(dumps(doc) + "\n")
    OUT.flush()


def log(msg):
    print(f"spark_peer: {msg}", file=sys.stderr, flush=True)


def jars_for(version, jars_json):
    if jars_json:
        with open(jars_json, encoding="utf-8") as f:
            text = [line for line in f if line.strip()][-1]
        entry = json.loads(text)["versions"].get(version)
        if not entry:
            log(f"{jars_json} has no jars for Hudi {version}")
            sys.exit(2)
        return entry["bundle"], entry.get("utilities")
    d = os.path.join(REPO, ".arbor-test", "spark-jars", version)
    bundle = os.path.join(d, f"hudi-spark3.5-bundle_2.12-{version}.jar")
    utilities = os.path.join(d, f"hudi-utilities-slim-bundle_2.12-{version}.jar")
    if not os.path.isfile(bundle):
        have = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, ".arbor-test", "spark-jars", "*")))
        log(f"no {bundle}; run scripts/spark.sh (cached versions: {have})")
        sys.exit(2)
    return bundle, (utilities if os.path.isfile(utilities) else None)


def log4j_file(level, workdir):
    path = os.path.join(workdir, "log4j2.properties")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"""rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
logger.hudi.name = org.apache.hudi
logger.hudi.level = {level}
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = ERROR
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = ERROR
""")
    return path


def start_session(args, bundle, utilities, workdir):
    from pyspark.sql import SparkSession

    # The jars go on the driver's class path (local mode: the executor is the driver JVM), not in
    # spark.jars: loaded by Spark's child class loader, Hudi 1.0.2's Avro model classes are not
    # found by Avro (ClassCastException GenericData$Record -> HoodieDeleteRecordList when a log
    # file has a delete block).
    # Hudi 1.2's Lance base files need the Lance Java SDK and the Arrow it is built on, which
    # the bundle leaves out (scripts/spark.sh puts them in <version>/lance/): ahead of Spark's
    # own Arrow 12 on the class path.
    lance = sorted(glob.glob(os.path.join(os.path.dirname(bundle), "lance", "*.jar")))
    jars = os.pathsep.join([*lance, *(j for j in (bundle, utilities) if j)])
    props = log4j_file(args.log_level, workdir)
    java_opts = f"-Dlog4j.configurationFile=file:{props} -Dlog4j2.configurationFile=file:{props} -XX:+UseSerialGC"
    b = (SparkSession.builder.master("local[2]").appName(f"arbor-spark-peer-hudi-{args.hudi_version}")
         .config("spark.driver.extraClassPath", jars)
         .config("spark.executor.extraClassPath", jars)
         .config("spark.driver.memory", args.driver_memory)
         .config("spark.driver.extraJavaOptions", java_opts)
         .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
         .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
         .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
         .config("spark.default.parallelism", str(args.shuffle_partitions))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.warehouse.dir", os.path.join(workdir, "warehouse"))
         .config("spark.local.dir", os.path.join(workdir, "local"))
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(args.log_level)
    return spark


def to_arrow(df):
    """The DataFrame's rows as a pyarrow Table (Spark's own Arrow conversion)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    batches = df._collect_as_arrow()
    if batches:
        return pa.Table.from_batches(batches).cast(schema) if batches[0].schema != schema else pa.Table.from_batches(batches)
    return schema.empty_table()


def canonical_rows(table, meta):
    names = table.column_names
    cols = [column(table.column(i)) for i in range(table.num_columns)]
    rows = [dict(zip(names, values)) for values in zip(*cols)] if cols else []
    if not meta:
        rows = [{k: v for k, v in r.items() if k not in META} for r in rows]
    return rows


class Peer:
    def __init__(self, spark, args, bundle, utilities, started):
        self.spark = spark
        self.args = args
        self.bundle = bundle
        self.utilities = utilities
        self.started = started

    # -- kinds ---------------------------------------------------------------------------------
    def info(self, req):
        jvm = self.spark.sparkContext._jvm
        return {
            "spark": self.spark.version,
            "hudi": self.args.hudi_version,
            "bundle": self.bundle,
            "utilities": self.utilities,
            "java": jvm.System.getProperty("java.version"),
            "session_start_seconds": round(self.started, 3),
        }

    def read(self, req):
        path = os.path.abspath(req["path"])
        opts = {}
        if req.get("incremental") is not None:
            begin, *rest = req["incremental"]
            opts["hoodie.datasource.query.type"] = "incremental"
            opts["hoodie.datasource.read.begin.instanttime"] = str(begin)
            if rest and rest[0] is not None:
                opts["hoodie.datasource.read.end.instanttime"] = str(rest[0])
        elif req.get("read_optimized"):
            opts["hoodie.datasource.query.type"] = "read_optimized"
        if req.get("as_of") is not None:
            opts["as.of.instant"] = str(req["as_of"])
        for k, v in (req.get("options") or {}).items():
            opts[k] = v if isinstance(v, str) else json.dumps(v)
        df = self.spark.read.format("hudi").options(**opts).load(path)
        if req.get("where"):
            df = df.where(req["where"])
        if req.get("columns"):
            df = df.select(*req["columns"])
        table = to_arrow(df)
        doc = digest_table(table)
        doc["options"] = opts
        if req.get("rows", True):
            rows = canonical_rows(table, bool(req.get("meta")))
            doc["rows"] = [json.loads(line) for line in sorted(dumps(r) for r in rows)]
        return doc

    def _collect(self, df, max_rows):
        if df is None or not df.columns:
            return {"columns": [], "rows": [], "row_count": 0}
        table = to_arrow(df.limit(max_rows + 1))
        rows = canonical_rows(table, True)
        doc = {"columns": table.column_names, "rows": rows[:max_rows], "row_count": len(rows)}
        if len(rows) > max_rows:
            doc["truncated"] = True
        return doc

    def sql(self, req):
        statements = req.get("statements") or [req["statement"]]
        df = None
        for stmt in statements:
            df = self.spark.sql(stmt)
        return self._collect(df, int(req.get("max_rows", 1000)))

    def write(self, req):
        path = os.path.abspath(req["path"])
        rows = req.get("rows") or []
        schema = req.get("schema")
        if schema:
            df = self.spark.createDataFrame([tuple(r.get(f) for f in self._field_names(schema)) for r in rows], schema)
        else:
            df = self.spark.createDataFrame(rows)
        opts = {"hoodie.table.name": os.path.basename(path.rstrip("/"))}
        for k, v in (req.get("options") or {}).items():
            opts[k] = v if isinstance(v, str) else json.dumps(v)
        df.write.format("hudi").options(**opts).mode(req.get("mode", "append")).save(path)
        return {"rows_written": len(rows), "options": opts}

    def _field_names(self, ddl):
        from pyspark.sql.types import _parse_datatype_string

        return [f.name for f in _parse_datatype_string(ddl).fields]

    def validate_mdt(self, req):
        path = os.path.abspath(req["path"])
        method = req.get("method") or ("validator" if self.utilities else "listing")
        if method == "validator":
            if not self.utilities:
                raise ValueError("method validator needs the hudi-utilities-slim-bundle jar (scripts/spark.sh could not fetch it)")
            return self._validator(path, req)
        if method == "procedure":
            return self._validate_procedure(path, req)
        if method == "listing":
            return self._validate_listing(path, req)
        raise ValueError(f"unknown validate_mdt method {method!r} (validator, listing, procedure)")

    def _register(self, path, req):
        name = req.get("table") or ("arbor_mdt_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(path)))
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{path}'")
        return name

    def _validate_listing(self, path, req):
        """The metadata table's partitions and files, as Hudi's Java reader lists them
        (show_metadata_table_partitions / show_metadata_table_files), against a listing of
        the local directory. A file listed by the metadata table must exist; a data file on
        disk must be listed unless its instant is pending (requested/inflight, not completed)."""
        name = self._register(path, req)
        parts = [r["partition"] for r in self._collect(
            self.spark.sql(f"CALL show_metadata_table_partitions(table => '{name}')"), 1 << 30)["rows"]]
        mdt = {}
        for part in parts:
            rows = self._collect(self.spark.sql(
                f"CALL show_metadata_table_files(table => '{name}', partition => '{part}')"), 1 << 30)["rows"]
            mdt[part] = {r["file_path"] for r in rows}
        completed, pending = timeline_instants(path)
        fs = {}
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != ".hoodie"]
            if any(f.startswith(".hoodie_partition_metadata") for f in files):
                rel = os.path.relpath(root, path)
                fs["" if rel == "." else rel] = {f for f in files if not f.startswith(".hoodie_partition_metadata")
                                                 and not f.endswith(".crc")}
        problems, notes = [], []
        for part in sorted(set(mdt) | set(fs)):
            if part not in fs:
                problems.append(f"partition {part!r} is in the metadata table but not on storage")
                continue
            if part not in mdt:
                problems.append(f"partition {part!r} is on storage but not in the metadata table")
                continue
            for f in sorted(mdt[part] - fs[part]):
                problems.append(f"{part}/{f}: listed by the metadata table, missing on storage")
            for f in sorted(fs[part] - mdt[part]):
                inst = file_instant(f)
                if inst in pending and inst not in completed:
                    notes.append(f"{part}/{f}: on storage only, instant {inst} is pending")
                else:
                    problems.append(f"{part}/{f}: on storage, not in the metadata table (instant {inst}, "
                                    f"{'completed' if inst in completed else 'not on the active timeline'})")
        return {
            "passed": not problems,
            "method": "listing (show_metadata_table_partitions/files vs the directory)",
            "message": "metadata table files agree with storage" if not problems else f"{len(problems)} problem(s)",
            "problems": problems,
            "notes": notes,
            "partitions": len(mdt),
            "files": sum(len(v) for v in mdt.values()),
        }

    def _validator(self, path, req):
        jvm = self.spark.sparkContext._jvm
        jsc = self.spark.sparkContext._jsc
        cls = "org.apache.hudi.utilities.HoodieMetadataTableValidator"
        args = req.get("args") or ["--validate-latest-file-slices", "--validate-latest-base-files",
                                    "--validate-all-file-groups"]
        argv = ["--base-path", path] + list(args)
        gw = self.spark.sparkContext._gateway
        jargs = gw.new_array(jvm.java.lang.String, len(argv))
        for i, a in enumerate(argv):
            jargs[i] = a
        config = jvm.java.lang.Class.forName(cls + "$Config", True, jvm.Thread.currentThread().getContextClassLoader())
        cfg = config.getDeclaredConstructor(gw.new_array(jvm.java.lang.Class, 0)).newInstance(gw.new_array(jvm.java.lang.Object, 0))
        jvm.com.beust.jcommander.JCommander(cfg, None, jargs)
        validator = getattr(jvm, cls)(jsc, cfg)
        try:
            passed = bool(validator.run())
            message = "HoodieMetadataTableValidator.run() returned " + str(passed)
        except Exception as e:  # the validator throws HoodieValidationException on a mismatch
            passed, message = False, f"{type(e).__name__}: {e}"
        return {"passed": passed, "method": "HoodieMetadataTableValidator", "args": argv, "message": message}

    def _validate_procedure(self, path, req):
        name = self._register(path, req)
        verbose = "true" if req.get("verbose") else "false"
        df = self.spark.sql(f"CALL validate_metadata_table_files(table => '{name}', verbose => {verbose})")
        doc = self._collect(df, int(req.get("max_rows", 1000)))
        # The procedure lists, per partition and file, whether the metadata table and the file
        # system agree (is_present_in_fs / is_present_in_metadata / fs_size / metadata_size).
        bad = []
        for r in doc["rows"]:
            fs = r.get("is_present_in_fs")
            mdt = r.get("is_present_in_metadata")
            if fs is not None and mdt is not None and fs != mdt:
                bad.append(r)
            elif r.get("fs_size") is not None and r.get("metadata_size") is not None and r["fs_size"] != r["metadata_size"]:
                bad.append(r)
        doc.update({
            "passed": not bad,
            "method": "CALL validate_metadata_table_files",
            "message": "metadata table files agree with the file system" if not bad else f"{len(bad)} file(s) disagree",
            "mismatches": bad,
        })
        return doc


def timeline_instants(path):
    """(completed, pending) requested instant times of the active timeline in .hoodie/timeline
    (table versions 8 and 9) or .hoodie (version 6): completed files are REQ_COMPLETION.action
    (v8+) or REQ.action (v6); pending ones REQ.action.requested / .inflight."""
    completed, pending = set(), set()
    dirs = [os.path.join(path, ".hoodie", "timeline"), os.path.join(path, ".hoodie")]
    # After an arbor publication the active timeline lives where hoodie.timeline.path says
    # (relative to .hoodie).
    try:
        with open(os.path.join(path, ".hoodie", "hoodie.properties"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k == "hoodie.timeline.path" and v.strip():
                    dirs.insert(0, os.path.join(path, ".hoodie", v.strip()))
    except OSError:
        pass
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            head = f.split(".", 1)[0]
            if not head[:1].isdigit():
                continue
            req = head.split("_", 1)[0]
            if f.endswith(".requested") or f.endswith(".inflight"):
                pending.add(req)
            else:
                completed.add(req)
    return completed, pending


def file_instant(name):
    """The instant time in a data file's name: base files FILEID_TOKEN_INSTANT.ext, log files
    .FILEID_INSTANT.log.VERSION_TOKEN."""
    if ".log." in name:
        return name.lstrip(".").split(".log.", 1)[0].rsplit("_", 1)[-1]
    return name.rsplit(".", 1)[0].rsplit("_", 1)[-1]


def error_text(e):
    """One line: a Java exception's class and message and those of its root cause (py4j's own
    text carries the whole Java stack trace), else Python's type and message."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            text = str(java.toString())
            root, seen = java, 0
            while root.getCause() is not None and seen < 20:
                root, seen = root.getCause(), seen + 1
            if seen:
                text += " | root cause: " + str(root.toString())
            return " ".join(text.split())[:2000]
        except Exception:  # the gateway may be gone; fall back to py4j's text
            pass
    msg = str(e).strip()
    if "\n" in msg:
        msg = msg.splitlines()[0]
    return f"{type(e).__name__}: {msg}"[:2000]


KINDS = {"info", "read", "sql", "write", "validate_mdt"}


def main(argv):
    global OUT
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hudi-version", required=True)
    p.add_argument("--jars-json")
    p.add_argument("--input")
    p.add_argument("--driver-memory", default="1g")
    p.add_argument("--shuffle-partitions", type=int, default=2)
    p.add_argument("--log-level", default="WARN")
    args = p.parse_args(argv[1:])

    # Keep the real stdout for result lines; everything written on fd 1 afterwards (the JVM's
    # System.out, print()) goes to stderr.
    OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    lines = (open(args.input, encoding="utf-8") if args.input else sys.stdin).read().splitlines()
    checks = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]

    bundle, utilities = jars_for(args.hudi_version, args.jars_json)
    workdir = tempfile.mkdtemp(prefix="arbor-spark-peer-")
    t0 = time.monotonic()
    try:
        spark = start_session(args, bundle, utilities, workdir)
        spark.range(1).count()  # the first job warms up the executor threads
    except Exception as e:
        emit({"id": None, "kind": "session", "ok": False, "error": f"{type(e).__name__}: {e}"})
        return 2
    started = time.monotonic() - t0
    log(f"Spark {spark.version} with Hudi {args.hudi_version} started in {started:.1f}s")
    peer = Peer(spark, args, bundle, utilities, started)

    for n, line in enumerate(checks):
        t = time.monotonic()
        req = {}
        try:
            req = json.loads(line)
            kind = req.get("kind", "read")
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r} (one of {sorted(KINDS)})")
            doc = getattr(peer, kind)(req)
            doc["ok"] = True
        except Exception as e:  # each check's failure is its own result line
            doc = {"ok": False, "error": error_text(e)}
            log(f"check {req.get('id', n)} failed:\n{traceback.format_exc()}")
        doc["id"] = req.get("id", n) if isinstance(req, dict) else n
        doc["kind"] = req.get("kind", "read") if isinstance(req, dict) else None
        doc["seconds"] = round(time.monotonic() - t, 3)
        emit(doc)
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
