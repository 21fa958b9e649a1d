#!/usr/bin/env python3
"""Does Java's cleaner delete what arbor protects? (issue 34 item 4), and does Spark follow a
publication?

For each Hudi version (one table version each: 1.1.1 -> table version 9, 1.0.2 -> 8, 1.2.0 -> 9)
and each table type, arbor builds a table with history on main, a tag at the first write, a
working branch cut at an early head (so it inherits file slices main rewrites later), a shallow
clone pinning a later head, and more main writes (merge-on-read: compactions on main, so old slices
become cleanable). arbor records every view (main, main as of each write, the tag, the branch, the
branch as of its instants, the clone), then Spark runs Hudi's own clean with the most aggressive
retention (`CALL run_clean(retain_commits => 1)`, then `clean_policy => 'KEEP_LATEST_FILE_VERSIONS',
file_versions_retained => 1`) and arbor reads every view again; every data file Java deleted is
matched against the files each view needed (`arbor files --json`, taken before the clean).

Then a publication: a fresh branch from main's head with a write, `arbor branch publish`, Spark
reads main (snapshot, time travel, metadata table off) and upserts into it, arbor reads Spark's
write, a second publication, Spark reads again, a Java clean after the publication, and arbor
reads every protected view once more.

Usage (with the python scripts/spark.sh prints):
  $PY scripts/spark_protect.py [--arbor target/debug/arbor] [--versions 1.1.1,1.0.2]
                               [--types cow,mor] [--workdir DIR] [--json REPORT.json]
Prints the JSON report on stdout (and to --json). `summary.losses` lists every view that read
differently after a Java clean, `summary.spark_mismatches` every Spark/arbor disagreement.
Exit status 0 when the run finished (losses are findings, not failures); 2 when a tool could not run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from peer_digest import digest_table  # noqa: E402

TABLE_VERSION = {"1.0.2": 8, "1.1.1": 9, "1.2.0": 9}
REMOVE_STALE_CRC = True
PROTECT_BRANCH_BASE = False
STALE_CRC_LOG = []
SCHEMA = "id STRING, city STRING, fare DOUBLE, n BIGINT"


class ToolError(Exception):
    pass


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-800:]}")
    return r


class Arbor:
    def __init__(self, exe, work):
        self.exe = exe
        self.work = work
        self.log = []  # every command run, for reproduction
        self.n = 0

    def __call__(self, *args, check=True):
        cmd = [self.exe] + [str(a) for a in args]
        self.log.append(" ".join(cmd))
        return run(cmd, check=check)

    def csv(self, rows):
        self.n += 1
        path = os.path.join(self.work, f"in{self.n}.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("id,city,fare,n\n")
            for r in rows:
                f.write(f"{r[0]},{r[1]},{r[2]},{r[3]}\n")
        return path

    def write(self, table, rows, *extra):
        out = self("write", table, self.csv(rows), *extra).stdout
        # "... committed ...: instant 2026... (commit, completed 2026...)"
        for tok in out.split():
            if len(tok) >= 17 and tok[:17].isdigit():
                return tok.rstrip(",()")
        raise ToolError(f"no instant in: {out}")

    def timeline(self, table, *extra):
        return json.loads(self("timeline", table, "--json", *extra).stdout)

    def view(self, table, extra):
        """rows (sorted jsonl lines) and data digest of a read, or the error."""
        r = self("read", table, "--format", "jsonl", *extra, check=False)
        if r.returncode != 0:
            return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
        rows = sorted(line for line in r.stdout.splitlines() if line.strip())
        doc = {"rows": rows, "row_count": len(rows)}
        out = os.path.join(self.work, "read.parquet")
        r2 = self("read", table, "--format", "parquet", "--output", out, *extra, check=False)
        if r2.returncode == 0:
            doc["data_sha256"] = digest_table(pq.read_table(out))["data_sha256"]
        return doc

    def files(self, table, extra):
        r = self("files", table, "--json", *extra, check=False)
        if r.returncode != 0:
            return None
        names = set()
        for g in json.loads(r.stdout):
            p = g["partition"]
            if g.get("base_file"):
                names.add(f"{p}/{g['base_file']['name']}")
            for lf in g.get("log_files") or []:
                names.add(f"{p}/{lf['name'] if isinstance(lf, dict) else lf}")
        return names

    def validate(self, table, extra):
        r = self("validate", table, "--json", *extra, check=False)
        doc = {"exit": r.returncode}
        try:
            j = json.loads(r.stdout.strip().splitlines()[0]) if r.stdout.strip() else {}
            doc["differences"] = j.get("differences", [])
            if "error" in j and "differences" not in j:
                doc["error"] = j["error"]
        except (json.JSONDecodeError, IndexError):
            doc["stdout"] = r.stdout[-500:]
        return doc


def storage_files(table):
    """Data files (outside .hoodie) and metadata-table files, relative to the table."""
    out = set()
    for root, dirs, files in os.walk(table):
        parts = os.path.relpath(root, table).split(os.sep)
        if parts[0] == ".hoodie" and not (len(parts) >= 3 and parts[1] == "metadata" and parts[2] != ".hoodie"):
            continue
        for f in files:
            if f.endswith(".crc") or f.startswith(".hoodie_partition_metadata"):
                continue
            out.add(os.path.normpath(os.path.join(*parts, f)))
    return out


# ---------------------------------------------------------------------------------------------
# The scenario


def build(arbor, work, kind, version):
    """Returns the table dict: path, clone, instants and the views to compare."""
    name = f"{kind}{version}"
    t = os.path.join(work, name)
    clone = os.path.join(work, f"{name}_clone")
    main_writes = []

    def main_write(i, extra=()):
        rows = [("a", "sf", f"{i}.5", i), ("b", "sf", f"{i}.25", i), ("c", "nyc", f"{i}.75", i)]
        main_writes.append(arbor.write(t, rows, *extra))

    main_write(1, ["--op", "insert", "--type", kind, "--key", "id", "--partition-by", "city", "--ordering", "n",
                   "--table-version", str(version)])
    main_write(2)
    if kind == "mor":
        arbor("compact", t)  # the branch below then inherits a slice whose base no savepoint names
    main_write(3)
    arbor("tag", "create", t, "v1", "--instant", main_writes[0])
    # the branch is cut at main's head (w3): it rewrites sf, and inherits nyc (w3's slice) from main
    arbor("branch", "create", t, "audit")
    if PROTECT_BRANCH_BASE:
        # the proposed remedy: a savepoint on main at the branch's base, which Java's cleaner honours
        arbor("savepoint", "create", t, "--instant", main_writes[-1], "--comment", "base of branch audit")
    branch_writes = [arbor.write(t, [("a", "sf", "100.5", 100), ("e", "la", "7.5", 7)], "--branch", "audit"),
                     arbor.write(t, [("a", "sf", "101.5", 101)], "--branch", "audit")]
    main_write(4)
    main_write(5)
    if kind == "mor":
        arbor("compact", t)
    # the clone pins main's head here (after w5 and, MOR, a compaction): not the branch's base
    clone_json = json.loads(arbor("clone", t, clone, "--json").stdout)
    main_write(6)
    main_write(7)
    if kind == "mor":
        arbor("compact", t)
    main_write(8)
    return {"name": name, "path": t, "clone": clone, "type": kind, "table_version": version,
            "main_writes": main_writes, "branch_writes": branch_writes, "tag_instant": main_writes[0],
            "branch_base": main_writes[2], "clone_instant": clone_json.get("instant"),
            "savepoints": json.loads(arbor("savepoint", "list", t, "--json").stdout)}


def views_of(t):
    """(view id, table path, arbor read args) of everything a Java clean must not break."""
    v = [("main", t["path"], [])]
    for i, inst in enumerate(t["main_writes"], 1):
        v.append((f"main@w{i}", t["path"], ["--as-of", inst]))
    v.append(("tag:v1", t["path"], ["--tag", "v1"]))
    v.append(("branch:audit", t["path"], ["--branch", "audit"]))
    v.append(("branch:audit@base", t["path"], ["--branch", "audit", "--as-of", t["branch_base"]]))
    v.append(("branch:audit@b1", t["path"], ["--branch", "audit", "--as-of", t["branch_writes"][0]]))
    v.append(("branch:audit@w2(inherited history)", t["path"], ["--branch", "audit", "--as-of", t["main_writes"][1]]))
    v.append(("clone", t["clone"], []))
    return v


def snapshot(arbor, t):
    state = {}
    for vid, path, extra in views_of(t):
        state[vid] = arbor.view(path, extra)
        state[vid]["files"] = arbor.files(path, extra)
    state["_validate"] = {"main": arbor.validate(t["path"], []),
                          "branch:audit": arbor.validate(t["path"], ["--branch", "audit"]),
                          "clone": arbor.validate(t["clone"], [])}
    state["_storage"] = storage_files(t["path"])
    return state


def compare(before, after, deleted):
    """Per view: same, or what changed, with the deleted files it needed."""
    out = {}
    for vid, b in before.items():
        if vid.startswith("_"):
            continue
        a = after[vid]
        needed = sorted((b.get("files") or set()) & deleted)
        if "error" in b:
            res = {"status": "error before too", "before": b["error"], "after": a.get("error", "reads now")}
        elif "error" in a:
            res = {"status": "LOST: read fails", "error": a["error"]}
        elif a["rows"] != b["rows"]:
            res = {"status": "LOST: rows differ", "before": b["rows"], "after": a["rows"]}
        else:
            res = {"status": "same"}
        if needed:
            res["deleted_files_it_needed"] = needed
        out[vid] = res
    return out


def stale_crcs(table):
    """Hadoop LocalFileSystem `.<name>.crc` sidecars that no longer match their file: Java's
    ChecksumFileSystem then fails to read the file (for hoodie.properties: "Could not load Hoodie
    properties"). Java writes them on file:// tables; arbor rewrites files without them."""
    out = []
    for root, _, files in os.walk(table):
        for f in files:
            if not (f.startswith(".") and f.endswith(".crc")):
                continue
            target = os.path.join(root, f[1:-4])
            crc = os.path.join(root, f)
            if not os.path.exists(target):
                continue
            with open(crc, "rb") as fh:
                raw = fh.read()
            if raw[:4] != b"crc\0":
                continue
            bpc = int.from_bytes(raw[4:8], "big")
            with open(target, "rb") as fh:
                data = fh.read()
            sums = b"".join(zlib.crc32(data[i:i + bpc]).to_bytes(4, "big") for i in range(0, len(data), bpc))
            if sums != raw[8:]:
                out.append(os.path.relpath(crc, table))
    return sorted(out)


def spark_session(py, version, checks, work, tag):
    stale = {}
    for d in sorted(os.listdir(work)):
        full = os.path.join(work, d)
        if os.path.isdir(os.path.join(full, ".hoodie")):
            found = stale_crcs(full)
            if found:
                stale[d] = found
                if REMOVE_STALE_CRC:
                    for f in found:
                        os.remove(os.path.join(full, f))
    STALE_CRC_LOG.append({"before_session": tag, "hudi": version, "stale": stale, "removed": REMOVE_STALE_CRC})
    cfile = os.path.join(work, f"checks-{version}-{tag}.jsonl")
    with open(cfile, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(c) + "\n" for c in checks)
    t0 = time.monotonic()
    r = subprocess.run([py, os.path.join(HERE, "spark_peer.py"), "--hudi-version", version, "--input", cfile],
                       capture_output=True, text=True)
    with open(os.path.join(work, f"spark-{version}-{tag}.log"), "w", encoding="utf-8") as f:
        f.write(r.stderr)
    results = {}
    for line in r.stdout.splitlines():
        if line.strip():
            j = json.loads(line)
            results[j["id"]] = j
    if r.returncode == 2:
        raise ToolError(f"spark {version} did not start; see {work}/spark-{version}-{tag}.log")
    return results, round(time.monotonic() - t0, 1), cfile


def clean_result(res):
    if not res:
        return None
    if not res.get("ok"):
        return {"error": res.get("error")}
    return res.get("rows")


def jset(files):
    return sorted(files)


def spark_write_check(cid, path, rows, version):
    return {"id": cid, "kind": "write", "path": path, "schema": SCHEMA, "mode": "append",
            "rows": [{"id": r[0], "city": r[1], "fare": r[2], "n": r[3]} for r in rows],
            "options": {"hoodie.datasource.write.operation": "upsert",
                        "hoodie.datasource.write.recordkey.field": "id",
                        "hoodie.datasource.write.partitionpath.field": "city",
                        "hoodie.datasource.write.precombine.field": "n",
                        "hoodie.write.auto.upgrade": "false"}}


def spark_vs_arbor(arbor, spark_res, path, extra, expected=None):
    """Spark's read against arbor's read of the same view (taken now, or `expected`, taken when
    Spark read)."""
    a = expected if expected is not None else arbor.view(path, extra)
    if not spark_res or not spark_res.get("ok"):
        return {"agree": False, "spark_error": (spark_res or {}).get("error"), "arbor": a.get("error") or a.get("rows")}
    if "error" in a:
        return {"agree": False, "arbor_error": a["error"], "spark_rows": spark_res.get("rows")}
    agree = spark_res.get("data_sha256") == a.get("data_sha256")
    doc = {"agree": agree, "row_count": a["row_count"]}
    if not agree:
        doc.update(arbor_rows=a["rows"], spark_rows=spark_res.get("rows"))
    return doc


def run_version(arbor, py, version, types, work, report):
    tv = TABLE_VERSION[version]
    vrep = report["versions"].setdefault(version, {"table_version": tv, "tables": {}})
    tables = {}
    for kind in types:
        t = build(arbor, work, kind, tv)
        tables[kind] = t
        vrep["tables"][t["name"]] = {"build": {k: v for k, v in t.items() if k not in ("savepoints",)},
                                     "savepoints": t["savepoints"]}
    # ---- 1. the state before any Java clean
    before = {k: snapshot(arbor, t) for k, t in tables.items()}
    for k, t in tables.items():
        vrep["tables"][t["name"]]["before"] = {
            vid: {kk: vv for kk, vv in s.items() if kk != "files"} for vid, s in before[k].items()
            if not vid.startswith("_")}
        vrep["tables"][t["name"]]["before_validate"] = before[k]["_validate"]

    # ---- 2a. Java clean, KEEP_LATEST_COMMITS 1 (plus Spark's own reads first, compared with arbor)
    checks = [{"id": "info", "kind": "info"}]
    for k, t in tables.items():
        n = t["name"]
        checks += [
            {"id": f"{n}/reg", "kind": "sql", "statement": f"CREATE TABLE {n} USING hudi LOCATION '{t['path']}'"},
            {"id": f"{n}/snap", "kind": "read", "path": t["path"]},
            {"id": f"{n}/tt_tag", "kind": "read", "path": t["path"], "as_of": t["tag_instant"]},
            {"id": f"{n}/clean_commits", "kind": "sql",
             "statement": f"CALL run_clean(table => '{n}', retain_commits => 1)"},
            {"id": f"{n}/snap_after", "kind": "read", "path": t["path"]},
            {"id": f"{n}/tt_tag_after", "kind": "read", "path": t["path"], "as_of": t["tag_instant"]},
        ]
    res, secs, cfile = spark_session(py, version, checks, work, "clean_commits")
    vrep["spark_sessions"] = [{"step": "clean_commits", "seconds": secs, "checks": cfile,
                               "info": res.get("info")}]
    mid = {}
    for k, t in tables.items():
        n = t["name"]
        tr = vrep["tables"][n]
        mid[k] = snapshot(arbor, t)
        deleted = before[k]["_storage"] - mid[k]["_storage"]
        tr["java_clean_commits"] = {
            "returned": clean_result(res.get(f"{n}/clean_commits")),
            "deleted_files": jset(deleted),
            "views": compare(before[k], mid[k], deleted),
            "validate_after": mid[k]["_validate"],
            "spark_before": {"snapshot": spark_vs_arbor(arbor, res.get(f"{n}/snap"), t["path"], []) if False else None},
        }
        # Spark's own reads against arbor's rows recorded before the clean
        for sid, vid in ((f"{n}/snap", "main"), (f"{n}/tt_tag", "tag:v1"),
                         (f"{n}/snap_after", "main"), (f"{n}/tt_tag_after", "tag:v1")):
            s = res.get(sid) or {}
            a = before[k][vid]
            tr["java_clean_commits"].setdefault("spark_reads", {})[sid.split("/")[1]] = (
                {"agree": s.get("data_sha256") == a.get("data_sha256")} if s.get("ok")
                else {"agree": False, "spark_error": s.get("error")})
        del tr["java_clean_commits"]["spark_before"]

    # ---- 2b. Java clean, KEEP_LATEST_FILE_VERSIONS 1. run_clean schedules a clean only after
    # hoodie.clean.max.commits (1) commits since the last clean, so main gets one more write first
    for k, t in tables.items():
        rows = [("a", "sf", "9.5", 9), ("b", "sf", "9.25", 9), ("c", "nyc", "9.75", 9)]
        t["main_writes"].append(arbor.write(t["path"], rows))
        mid[k] = snapshot(arbor, t)
    checks = [{"id": "info", "kind": "info"}]
    for k, t in tables.items():
        n = t["name"]
        checks += [
            {"id": f"{n}/reg", "kind": "sql", "statement": f"CREATE TABLE {n} USING hudi LOCATION '{t['path']}'"},
            {"id": f"{n}/clean_versions", "kind": "sql",
             "statement": f"CALL run_clean(table => '{n}', clean_policy => 'KEEP_LATEST_FILE_VERSIONS', "
                          f"file_versions_retained => 1)"},
        ]
    res, secs, cfile = spark_session(py, version, checks, work, "clean_versions")
    vrep["spark_sessions"].append({"step": "clean_versions", "seconds": secs, "checks": cfile})
    after = {}
    for k, t in tables.items():
        n = t["name"]
        tr = vrep["tables"][n]
        after[k] = snapshot(arbor, t)
        deleted = mid[k]["_storage"] - after[k]["_storage"]
        tr["java_clean_versions"] = {
            "returned": clean_result(res.get(f"{n}/clean_versions")),
            "deleted_files": jset(deleted),
            "views": compare(mid[k], after[k], deleted),
            "views_vs_before_any_clean": compare(
                {vid: x for vid, x in before[k].items() if vid != "main"}, after[k],
                before[k]["_storage"] - after[k]["_storage"]),
            "validate_after": after[k]["_validate"],
        }

    # ---- 3. publication
    pubs = {}
    for k, t in tables.items():
        n = t["name"]
        p = {"errors": []}
        try:
            arbor("branch", "create", t["path"], "pub")
            p["pub_write"] = arbor.write(t["path"], [("b", "sf", "200.5", 200), ("f", "nyc", "8.5", 8)],
                                         "--branch", "pub")
            p["main_head_before"] = t["main_writes"][-1]
            p["publish1"] = arbor("branch", "publish", t["path"], "pub", "--json").stdout.strip()
        except ToolError as e:
            p["errors"].append(str(e))
        pubs[k] = p
    checks = [{"id": "info", "kind": "info"}]
    for k, t in tables.items():
        n, path = t["name"], t["path"]
        checks += [
            {"id": f"{n}/p1_snap", "kind": "read", "path": path},
            {"id": f"{n}/p1_nomdt", "kind": "read", "path": path, "options": {"hoodie.metadata.enable": "false"}},
            {"id": f"{n}/p1_tt_last_main", "kind": "read", "path": path, "as_of": t["main_writes"][-1]},
            {"id": f"{n}/p1_tt_tag", "kind": "read", "path": path, "as_of": t["tag_instant"]},
            spark_write_check(f"{n}/p1_upsert", path, [("a", "sf", 500.5, 500), ("g", "la", 9.5, 9)], version),
            {"id": f"{n}/p1_snap_after_write", "kind": "read", "path": path},
            {"id": f"{n}/p1_mdt", "kind": "validate_mdt", "path": path},
        ]
    res, secs, cfile = spark_session(py, version, checks, work, "publish1")
    vrep["spark_sessions"].append({"step": "publish1", "seconds": secs, "checks": cfile})
    for k, t in tables.items():
        n, path, p = t["name"], t["path"], pubs[k]
        tr = vrep["tables"][n]
        # arbor's expected views for the Spark reads are taken now for the time travel (unchanged by
        # Spark's later write) and for the snapshot after Spark's write
        pr = {"publish1": p.get("publish1"), "errors": p["errors"]}
        pr["spark_write"] = {kk: res.get(f"{n}/p1_upsert", {}).get(kk) for kk in ("ok", "error", "rows_written")}
        pr["spark_after_write_vs_arbor_main"] = spark_vs_arbor(arbor, res.get(f"{n}/p1_snap_after_write"), path, [])
        pr["spark_tt_last_main_write_vs_arbor"] = spark_vs_arbor(arbor, res.get(f"{n}/p1_tt_last_main"), path,
                                                    ["--as-of", t["main_writes"][-1]])
        pr["spark_tt_tag_vs_arbor"] = spark_vs_arbor(arbor, res.get(f"{n}/p1_tt_tag"), path, ["--tag", "v1"])
        # the pre-write snapshot: arbor's main as of the publication (= pub head)
        if p.get("pub_write"):
            pr["spark_snapshot_vs_arbor_pub_head"] = spark_vs_arbor(arbor, res.get(f"{n}/p1_snap"), path,
                                                                    ["--as-of", p["pub_write"]])
            pr["spark_nomdt_vs_arbor_pub_head"] = spark_vs_arbor(arbor, res.get(f"{n}/p1_nomdt"), path,
                                                                 ["--as-of", p["pub_write"]])
        m = res.get(f"{n}/p1_mdt") or {}
        pr["spark_validate_mdt"] = {kk: m.get(kk) for kk in ("ok", "passed", "problems", "error")}
        pr["arbor_validate_main"] = arbor.validate(path, [])
        pr["arbor_timeline_tail"] = [(e["timestamp"], e["action"], e.get("operation")) for e in arbor.timeline(path)[-4:]]
        # second publication
        try:
            arbor("branch", "create", path, "pub2")
            p["pub2_write"] = arbor.write(path, [("c", "nyc", "300.5", 300)], "--branch", "pub2")
            pr["publish2"] = arbor("branch", "publish", path, "pub2", "--json").stdout.strip()
        except ToolError as e:
            pr["errors"].append(str(e))
        with open(os.path.join(path, ".hoodie", "hoodie.properties"), encoding="utf-8") as f:
            pr["root_timeline_path"] = [line.strip() for line in f if line.startswith("hoodie.timeline.path")]
        tr["publication"] = pr
        pubs[k]["protected_before_clean3"] = snapshot(arbor, t)
        # arbor's rows of what Spark reads first in the next session (before its clean)
        pubs[k]["expected_p2"] = {
            "snap": arbor.view(path, []),
            "tt_pub1": arbor.view(path, ["--as-of", p["pub_write"]]) if p.get("pub_write") else None}

    checks = [{"id": "info", "kind": "info"}]
    for k, t in tables.items():
        n, path = t["name"], t["path"]
        checks += [
            {"id": f"{n}/p2_snap", "kind": "read", "path": path},
            {"id": f"{n}/p2_tt_pub1", "kind": "read", "path": path, "as_of": pubs[k].get("pub_write") or t["tag_instant"]},
            {"id": f"{n}/reg", "kind": "sql", "statement": f"CREATE TABLE {n} USING hudi LOCATION '{path}'"},
            {"id": f"{n}/p2_clean", "kind": "sql", "statement": f"CALL run_clean(table => '{n}', retain_commits => 1)"},
            {"id": f"{n}/p2_snap_after_clean", "kind": "read", "path": path},
            {"id": f"{n}/p2_mdt", "kind": "validate_mdt", "path": path},
        ]
    res, secs, cfile = spark_session(py, version, checks, work, "publish2")
    vrep["spark_sessions"].append({"step": "publish2_and_clean", "seconds": secs, "checks": cfile})
    for k, t in tables.items():
        n, path, p = t["name"], t["path"], pubs[k]
        pr = vrep["tables"][n]["publication"]
        b3 = p["protected_before_clean3"]
        pr["spark_p2_snapshot_vs_arbor"] = spark_vs_arbor(arbor, res.get(f"{n}/p2_snap"), path, [],
                                                          expected=p["expected_p2"]["snap"])
        if p.get("pub_write"):
            pr["spark_p2_tt_pub1_vs_arbor"] = spark_vs_arbor(arbor, res.get(f"{n}/p2_tt_pub1"), path, [],
                                                             expected=p["expected_p2"]["tt_pub1"])
        a3 = snapshot(arbor, t)
        deleted = b3["_storage"] - a3["_storage"]
        pr["java_clean_after_publication"] = {
            "returned": clean_result(res.get(f"{n}/p2_clean")),
            "deleted_files": jset(deleted),
            "views": compare(b3, a3, deleted),
            "validate_after": a3["_validate"],
            "spark_snapshot_after_clean_vs_arbor": spark_vs_arbor(arbor, res.get(f"{n}/p2_snap_after_clean"), path, []),
            "spark_validate_mdt": {kk: (res.get(f"{n}/p2_mdt") or {}).get(kk) for kk in ("ok", "passed", "problems", "error")},
        }


def summarize(report):
    losses, mismatches = [], []
    for v, vrep in report["versions"].items():
        for n, tr in vrep.get("tables", {}).items():
            for step, key in (("java_clean_commits", "views"), ("java_clean_versions", "views")):
                for vid, r in (tr.get(step, {}).get(key) or {}).items():
                    if r["status"].startswith("LOST"):
                        losses.append({"hudi": v, "table": n, "after": step, "view": vid, **r})
            pub = tr.get("publication", {})
            for vid, r in (pub.get("java_clean_after_publication", {}).get("views") or {}).items():
                if r["status"].startswith("LOST"):
                    losses.append({"hudi": v, "table": n, "after": "java_clean_after_publication", "view": vid, **r})
            for key, r in pub.items():
                if isinstance(r, dict) and "agree" in r and not r["agree"]:
                    mismatches.append({"hudi": v, "table": n, "check": key, **r})
            sa = pub.get("java_clean_after_publication", {}).get("spark_snapshot_after_clean_vs_arbor")
            if sa and not sa.get("agree"):
                mismatches.append({"hudi": v, "table": n, "check": "spark_snapshot_after_clean", **sa})
            for sid, r in (tr.get("java_clean_commits", {}).get("spark_reads") or {}).items():
                if not r.get("agree"):
                    mismatches.append({"hudi": v, "table": n, "check": f"before publication: {sid}", **r})
    report["summary"] = {"losses": losses, "spark_mismatches": mismatches}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arbor", default=os.path.join(REPO, "target", "debug", "arbor"))
    p.add_argument("--versions", default="1.1.1,1.0.2")
    p.add_argument("--types", default="cow,mor")
    p.add_argument("--workdir")
    p.add_argument("--json")
    p.add_argument("--keep-stale-crc", action="store_true",
                   help="do not delete stale Hadoop .crc sidecars before a Spark session (see stale_crc in the report)")
    p.add_argument("--protect-branch-base", action="store_true",
                   help="savepoint main at the branch's base after cutting it (the remedy under test)")
    args = p.parse_args(argv[1:])
    global REMOVE_STALE_CRC, PROTECT_BRANCH_BASE
    PROTECT_BRANCH_BASE = args.protect_branch_base
    REMOVE_STALE_CRC = not args.keep_stale_crc
    work = args.workdir or tempfile.mkdtemp(prefix="arbor-spark-protect-")
    if args.workdir:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    report = {"workdir": work, "versions": {}, "errors": [], "protect_branch_base": args.protect_branch_base}
    t0 = time.monotonic()
    status = 0
    for v in args.versions.split(","):
        vwork = os.path.join(work, v)
        os.makedirs(vwork, exist_ok=True)
        arbor = Arbor(args.arbor, vwork)
        try:
            run_version(arbor, sys.executable, v, args.types.split(","), vwork, report)
        except ToolError as e:
            report["errors"].append({"hudi": v, "error": str(e)})
            status = 2
        report["versions"].setdefault(v, {})["arbor_commands"] = arbor.log
        print(f"spark_protect: {v} done at {time.monotonic() - t0:.0f} s", file=sys.stderr)
    report["stale_crc"] = STALE_CRC_LOG
    summarize(report)
    report["summary"]["stale_crc_found"] = [x for x in STALE_CRC_LOG if x["stale"]]
    report["seconds"] = round(time.monotonic() - t0, 1)
    text = json.dumps(report, indent=1, sort_keys=True, default=sorted)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
