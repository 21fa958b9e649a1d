"""The shared parts of the Spark stage (scripts/spark_stage.py): the arbor CLI wrapper, the
in-process Spark peer, and `Stage`, which runs named checks and records each result.

A scenario module (scripts/spark_stage_<name>.py) has one function `run(stage)`: it builds its
tables with `stage.arbor`, drives Spark through `stage.spark` (a scripts/spark_peer.py `Peer`,
the same session for every scenario of one Hudi version) and records checks with
`stage.check(id, fn)` (fn returns a JSON-able detail or None, and raises to fail) or the
comparison helpers (`stage.agree`). A check that fails records its error and the scenario
goes on; an exception escaping `run` is one failed check named `<scenario>/crashed`.
"""

import json
import os
import subprocess
import time
import traceback

import pyarrow.parquet as pq

from canonical_rows import META, dumps
from peer_digest import digest_table

# Hudi version -> the table version it writes and the newest it reads.
TABLE_VERSION = {"1.0": 8, "1.1": 9, "1.2": 9}


def table_version_of(hudi_version):
    return TABLE_VERSION.get(".".join(hudi_version.split(".")[:2]), 9)


def table_properties(path):
    """The table's `.hoodie/hoodie.properties` as a dict (keys and values stripped, Java's `\\:`
    escape undone)."""
    props = {}
    with open(os.path.join(path, ".hoodie", "hoodie.properties"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip().replace("\\:", ":")
    return props


def minor_of(hudi_version):
    """"1.1" for "1.1.1"."""
    return ".".join(hudi_version.split(".")[:2])


def full_matrix():
    """True when ARBOR_SPARK_FULL=1: every scenario runs its whole matrix on every version."""
    return os.environ.get("ARBOR_SPARK_FULL") == "1"


# CI runs every scenario on every Hudi version, each with a share of its matrix, so that
# every version meets every item of issue 34 (and both table types across the scenarios)
# while the stage pays about one matrix per scenario. ARBOR_SPARK_FULL=1 runs all of it.
#   scenario -> Hudi minor -> the table types it runs there.
CI_TABLE_TYPES = {
    "writes": {"1.0": ("cow",), "1.1": ("mor",), "1.2": ("cow",)},
    "protect": {"1.0": ("cow",), "1.1": ("mor",), "1.2": ("cow",)},
    "concurrent": {"1.0": ("mor",), "1.1": ("cow",), "1.2": ("mor",)},
}


def table_types(stage, scenario, both_on=()):
    """The table types `scenario` covers on this stage's Hudi version: both with
    ARBOR_SPARK_FULL=1 or on the minors in `both_on`, else CI_TABLE_TYPES' share."""
    minor = minor_of(stage.hudi)
    if full_matrix() or minor in both_on:
        return ("cow", "mor")
    return CI_TABLE_TYPES[scenario].get(minor, ("cow", "mor"))


class ToolError(Exception):
    """A tool (the arbor CLI) failed where the scenario needed it to succeed."""


class Arbor:
    """The arbor CLI, run as a whole process per command."""

    def __init__(self, exe, work):
        self.exe = exe
        self.work = work
        self.log = []  # every command, for reproduction
        self.n = 0

    def __call__(self, *args, check=True, stdin=None):
        cmd = [self.exe] + [str(a) for a in args]
        self.log.append(" ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
        if check and r.returncode != 0:
            raise ToolError(f"{' '.join(cmd)} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-1200:]}")
        return r

    def json(self, *args):
        return json.loads(self(*args, "--json").stdout)

    def csv(self, header, rows):
        """Writes rows (tuples) as a CSV file with `header` and returns its path."""
        self.n += 1
        path = os.path.join(self.work, f"in{self.n}.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write(",".join(header) + "\n")
            for r in rows:
                f.write(",".join("" if v is None else str(v) for v in r) + "\n")
        return path

    def jsonl(self, rows):
        """Writes rows (dicts) as a JSON-lines file and returns its path."""
        self.n += 1
        path = os.path.join(self.work, f"in{self.n}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        return path

    def write(self, table, input_path, *extra):
        """`arbor write`; returns the requested time of the instant it committed."""
        doc = json.loads(self("write", table, input_path, "--json", *extra).stdout)
        return doc.get("instant") or doc.get("instant_time")

    def timeline(self, table, *extra):
        return json.loads(self("timeline", table, "--json", *extra).stdout)

    def view(self, table, extra=()):
        """The rows of an arbor read (digest through the same canonical functions as Spark's),
        or {"error": ...}."""
        out = os.path.join(self.work, "arbor-read.parquet")
        if os.path.exists(out):
            os.remove(out)
        r = self("read", table, "--format", "parquet", "--output", out, *extra, check=False)
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            return {"error": lines[-1] if lines else f"exit {r.returncode}"}
        t = pq.read_table(out)
        doc = digest_table(t)
        from spark_peer import canonical_rows
        doc["rows"] = [json.loads(line) for line in sorted(dumps(x) for x in canonical_rows(t, False))]
        return doc

    def validate(self, table, *extra):
        """`arbor validate --json`: {"ok": bool, "differences": [...], "error": ...}."""
        r = self("validate", table, "--json", *extra, check=False)
        doc = {"ok": r.returncode == 0, "exit": r.returncode}
        try:
            j = json.loads(r.stdout.strip().splitlines()[0]) if r.stdout.strip() else {}
            doc["differences"] = j.get("differences", [])
            if "error" in j:
                doc["error"] = j["error"]
        except (json.JSONDecodeError, IndexError):
            doc["stdout"] = r.stdout[-800:]
            doc["stderr"] = r.stderr[-800:]
        return doc


class CheckFailed(AssertionError):
    """A check's condition did not hold; the message says what was seen."""


def require(cond, msg):
    if not cond:
        raise CheckFailed(msg)


class Stage:
    def __init__(self, spark_peer, arbor, hudi_version, work, emit):
        self.spark = spark_peer
        self.arbor = arbor
        self.hudi = hudi_version
        self.table_version = table_version_of(hudi_version)
        self.work = work
        self.emit = emit
        self.scenario = None
        self.passed = 0
        self.failed = 0

    def path(self, name):
        """A fresh table directory for this scenario."""
        return os.path.join(self.work, f"{self.scenario}-{name}")

    def check(self, cid, fn):
        """Runs fn(); records `<scenario>/<cid>` passed (fn returned) or failed (fn raised)."""
        t0 = time.monotonic()
        doc = {"id": f"{self.scenario}/{cid}", "hudi": self.hudi}
        try:
            detail = fn()
            doc["ok"] = True
            if detail is not None:
                doc["detail"] = detail
        except Exception as e:  # each check's failure is its own result
            doc["ok"] = False
            doc["error"] = error_text(e)
            doc["trace"] = traceback.format_exc()[-3000:]
        doc["seconds"] = round(time.monotonic() - t0, 2)
        if doc["ok"]:
            self.passed += 1
        else:
            self.failed += 1
        self.emit(doc)
        return doc["ok"]

    # -- Spark ------------------------------------------------------------------------------
    def spark_read(self, path, **req):
        req["path"] = path
        return self.spark.read(req)

    def spark_sql(self, *statements, max_rows=1000):
        return self.spark.sql({"statements": list(statements), "max_rows": max_rows})

    def spark_write(self, path, rows, schema, options, mode="append"):
        return self.spark.write({"path": path, "rows": rows, "schema": schema, "options": options, "mode": mode})

    # -- comparisons ------------------------------------------------------------------------
    def agree(self, cid, path, arbor_args=(), spark=None, expect_rows=None):
        """Check `cid`: Spark's read of `path` (`spark`: spark_peer read fields) returns the
        same rows, value for value, as `arbor read path *arbor_args` (and, when given,
        `expect_rows` rows). With `"meta": True` in `spark` (and `--meta` in `arbor_args`) the
        `_hoodie_*` meta columns must agree too."""
        spark = dict(spark or {})

        def fn():
            a = self.arbor.view(path, list(arbor_args))
            require("error" not in a, f"arbor read failed: {a.get('error')}")
            s = self.spark_read(path, **spark)
            if s["data_sha256"] != a["data_sha256"]:
                only_s = [r for r in s["rows"] if r not in a["rows"]][:5]
                only_a = [r for r in a["rows"] if r not in s["rows"]][:5]
                raise CheckFailed(
                    f"rows differ: spark {s['row_count']} rows, arbor {a['row_count']}; "
                    f"only spark: {dumps(only_s)[:1500]}; only arbor: {dumps(only_a)[:1500]}")
            if spark.get("meta") and s["rows_sha256"] != a["rows_sha256"]:
                raise CheckFailed(
                    f"data rows agree but the _hoodie_* meta columns differ ({s['row_count']} rows)")
            if expect_rows is not None:
                require(a["row_count"] == expect_rows, f"{a['row_count']} rows, expected {expect_rows}")
            return {"rows": a["row_count"]}

        return self.check(cid, fn)

    def validates(self, cid, path, *extra):
        """Check `cid`: `arbor validate` passes on the table."""

        def fn():
            v = self.arbor.validate(path, *extra)
            require(v["ok"], f"arbor validate failed: {dumps(v)[:2500]}")

        return self.check(cid, fn)

    def java_validates(self, cid, path):
        """Check `cid`: Java's metadata-table reader lists exactly the files on storage."""

        def fn():
            r = self.spark.validate_mdt({"path": path, "method": "listing"})
            require(r["passed"], f"Java's metadata table listing disagrees: {dumps(r.get('problems'))[:2000]}")
            return {"files": r.get("files")}

        return self.check(cid, fn)


def error_text(e):
    name = type(e).__name__
    text = str(e).strip().replace("\n", " | ")
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            root = java
            while root.getCause() is not None and root.getCause() != root:
                root = root.getCause()
            text = f"{java.getClass().getName()}: {java.getMessage()}"
            if root != java:
                text += f" (root cause {root.getClass().getName()}: {root.getMessage()})"
        except Exception:  # the gateway may be gone
            pass
    return f"{name}: {text}"[:3000]


def strip_meta(rows):
    return [{k: v for k, v in r.items() if k not in META} for r in rows]
