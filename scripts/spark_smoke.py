#!/usr/bin/env python3
"""Smoke test of the Java peer against tables arbor writes: for table versions 8 and 9 and both
table types, arbor writes an insert, an upsert and a delete (a partitioned table with an
ordering field), then Spark with each cached Hudi version (scripts/spark.sh,
scripts/spark_peer.py), hudi-rs (scripts/peer_digest.py) and arbor itself read it: the latest
snapshot, with meta columns, read-optimized, time travel to the second write, incremental after
the first write, and with the metadata table off; and the metadata table is validated.
Every digest is canonical_rows.py's, so equal data_sha256 means equal rows.

Usage (with the python scripts/spark.sh prints):
  $PY scripts/spark_smoke.py [--arbor target/debug/arbor] [--versions 1.0.2,1.1.1,1.2.0]
                             [--workdir DIR] [--json REPORT.json]
Prints one line per (Hudi version, table, check) and then every disagreement with the commands
that reproduce it. Exit status 0 when the run finished (disagreements are findings, not
failures); 2 when a tool could not run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from canonical_rows import META, dumps  # noqa: E402
from peer_digest import Peer as RsPeer, digest_table  # noqa: E402

CSV = {
    "trips.csv": "id,city,fare,n\na,sf,1.5,1\nb,sf,2.5,2\nc,nyc,3.5,3\n",
    "up.csv": "id,city,fare,n\nb,sf,20.5,5\nd,nyc,4.5,4\n",
    "del.csv": "id,city,fare,n\nc,nyc,3.5,3\n",
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return r.stdout


def make_tables(arbor, work):
    for name, text in CSV.items():
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write(text)
    tables = {}
    for version in (8, 9):
        for kind in ("cow", "mor"):
            path = os.path.join(work, f"{kind}{version}")
            cmds = [
                [arbor, "write", path, os.path.join(work, "trips.csv"), "--op", "insert", "--type", kind,
                 "--key", "id", "--partition-by", "city", "--ordering", "n", "--table-version", str(version)],
                [arbor, "write", path, os.path.join(work, "up.csv"), "--op", "upsert"],
                [arbor, "write", path, os.path.join(work, "del.csv"), "--op", "delete"],
            ]
            for c in cmds:
                run(c)
            timeline = json.loads(run([arbor, "timeline", path, "--json"]))
            tables[f"{kind}{version}"] = {"path": path, "version": version, "type": kind,
                                          "timeline": timeline, "commands": [" ".join(c) for c in cmds]}
    return tables


def checks_for(name, t):
    """(check id, spark check, arbor read args, hudi-rs request or None)"""
    tl = t["timeline"]
    first, second = tl[0], tl[1]
    path = t["path"]
    return [
        ("snapshot", {"path": path, "meta": True}, ["--meta"], {}),
        ("read_optimized", {"path": path, "meta": True, "read_optimized": True}, ["--meta", "--read-optimized"], None),
        ("as_of_2nd", {"path": path, "meta": True, "as_of": second["timestamp"]},
         ["--meta", "--as-of", second["timestamp"]], {"as_of": second["timestamp"]}),
        ("incremental_after_1st", {"path": path, "meta": True, "incremental": [first["completion_time"], None]},
         ["--meta", "--incremental", first["completion_time"]],
         {"incremental": [first["completion_time"], tl[-1]["completion_time"]]}),
        ("incremental_after_1st_requested", {"path": path, "meta": True, "incremental": [first["timestamp"], None]},
         ["--meta", "--incremental", first["timestamp"]], None),
        ("snapshot_no_mdt", {"path": path, "meta": True, "options": {"hoodie.metadata.enable": "false"}},
         ["--meta"], None),
    ]


def arbor_read(arbor, path, extra, out):
    run([arbor, "read", path, "--format", "parquet", "--output", out] + extra)
    table = pq.read_table(out)
    doc = digest_table(table)
    jsonl = run([arbor, "read", path, "--format", "jsonl"] + [a for a in extra if a != "--meta"])
    doc["jsonl_rows"] = sorted(dumps(json.loads(line)) for line in jsonl.splitlines() if line.strip())
    return doc


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arbor", default=os.path.join(REPO, "target", "debug", "arbor"))
    p.add_argument("--versions")
    p.add_argument("--workdir")
    p.add_argument("--json")
    args = p.parse_args(argv[1:])
    jar_root = os.path.join(REPO, ".arbor-test", "spark-jars")
    versions = args.versions.split(",") if args.versions else sorted(
        v for v in os.listdir(jar_root) if os.path.isfile(os.path.join(jar_root, v, f"hudi-spark3.5-bundle_2.12-{v}.jar")))
    work = args.workdir or tempfile.mkdtemp(prefix="arbor-spark-smoke-")
    if args.workdir:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    print(f"spark_smoke: tables under {work}; Hudi versions {versions}", file=sys.stderr)

    tables = make_tables(args.arbor, work)
    expected = {}  # (table, check) -> arbor digest
    rs = {}
    rs_peer = RsPeer()
    for name, t in tables.items():
        for cid, _, extra, rsreq in checks_for(name, t):
            out = os.path.join(work, f"{name}.{cid}.parquet")
            try:
                expected[(name, cid)] = arbor_read(args.arbor, t["path"], extra, out)
            except Exception as e:
                expected[(name, cid)] = {"error": str(e)}
            if rsreq is not None:
                try:
                    rs[(name, cid)] = rs_peer.digest(t["path"], **rsreq)
                except Exception as e:
                    rs[(name, cid)] = {"error": f"{type(e).__name__}: {e}"}

    report = {"workdir": work, "tables": tables, "versions": {}, "disagreements": []}
    lines = []
    for v in versions:
        checks = [{"id": "info", "kind": "info"}]
        for name, t in tables.items():
            for cid, spark_check, _, _ in checks_for(name, t):
                checks.append(dict(spark_check, id=f"{name}/{cid}", kind="read"))
            checks.append({"id": f"{name}/validate_mdt", "kind": "validate_mdt", "path": t["path"]})
        cfile = os.path.join(work, f"checks-{v}.jsonl")
        with open(cfile, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(c) + "\n" for c in checks)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, os.path.join(HERE, "spark_peer.py"), "--hudi-version", v, "--input", cfile],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        with open(os.path.join(work, f"spark-{v}.log"), "w", encoding="utf-8") as f:
            f.write(r.stderr)
        results = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        with open(os.path.join(work, f"results-{v}.jsonl"), "w", encoding="utf-8") as f:
            f.write(r.stdout)
        info = next((x for x in results if x.get("id") == "info"), {})
        report["versions"][v] = {"wall_seconds": round(wall, 1), "session_start_seconds": info.get("session_start_seconds"),
                                 "exit": r.returncode, "checks": {}}
        repro = f"{sys.executable} {os.path.join(HERE, 'spark_peer.py')} --hudi-version {v} --input {cfile}"
        for res in results:
            if res.get("id") == "info" or res.get("id") is None:
                if not res.get("ok"):
                    lines.append(f"{v} session FAILED: {res.get('error')}")
                continue
            name, cid = res["id"].split("/", 1)
            report["versions"][v]["checks"][res["id"]] = res
            t = tables[name]
            if cid == "validate_mdt" and v.startswith("1.0.") and t["version"] == 9 and not res["ok"] and "versionCode:9" in res["error"]:
                lines.append(f"{v:6} {name:5} {cid:32} expected error (Hudi 1.0 reads table version 8 only)  ({res['seconds']}s)")
                continue
            if cid == "validate_mdt":
                status = ("passed" if res.get("passed") else "FAILED: " + str(res.get("message"))) if res["ok"] else "ERROR: " + res["error"]
                lines.append(f"{v:6} {name:5} {cid:32} {status}  ({res['seconds']}s)")
                if status != "passed":
                    report["disagreements"].append({"hudi": v, "table": name, "check": cid, "spark": res,
                                                    "reproduce": t["commands"] + [repro]})
                continue
            if v.startswith("1.0.") and t["version"] == 9 and not res["ok"] and "versionCode:9" in res["error"]:
                lines.append(f"{v:6} {name:5} {cid:32} expected error (Hudi 1.0 reads table version 8 only)  ({res['seconds']}s)")
                continue
            exp = expected[(name, cid)]
            rsd = rs.get((name, cid))
            problems = []
            if not res["ok"]:
                problems.append(f"spark error: {res['error']}")
            elif "error" in exp:
                problems.append(f"arbor error: {exp['error']} (spark read {res['row_count']} rows)")
            else:
                if res["data_sha256"] != exp["data_sha256"]:
                    problems.append("data rows differ")
                if res["rows_sha256"] != exp["rows_sha256"]:
                    problems.append("rows with meta columns differ")
                spark_rows = sorted(dumps({k: x for k, x in row.items() if k not in META}) for row in res["rows"])
                if spark_rows != exp["jsonl_rows"]:
                    problems.append("arbor --format jsonl rows differ")
                stypes = {n: ty for n, ty, _ in res["schema"]}
                atypes = {n: ty for n, ty, _ in exp["schema"]}
                if stypes != atypes:
                    problems.append(f"arrow types differ: spark {stypes} arbor {atypes}")
            if rsd is not None and res["ok"] and "error" not in rsd and rsd["data_sha256"] != res["data_sha256"]:
                problems.append(f"hudi-rs data differs from spark (hudi-rs rows {rsd['row_count']})")
            status = "agrees" if not problems else "; ".join(problems)
            lines.append(f"{v:6} {name:5} {cid:32} rows={res.get('row_count')} {status}  ({res['seconds']}s)")
            if problems:
                arbor_cmd = " ".join([args.arbor, "read", t["path"], "--format", "jsonl"] + checks_for(name, t)[[c[0] for c in checks_for(name, t)].index(cid)][2])
                report["disagreements"].append({
                    "hudi": v, "table": name, "check": cid, "problems": problems,
                    "spark_rows": res.get("rows"), "arbor_rows": [json.loads(x) for x in exp.get("jsonl_rows", [])],
                    "arbor_meta_rows_sha256": exp.get("rows_sha256"), "spark_meta_rows_sha256": res.get("rows_sha256"),
                    "spark_options": res.get("options"),
                    "hudi_rs": {k: rsd[k] for k in ("row_count", "data_sha256", "error") if rsd and k in rsd} if rsd else None,
                    "reproduce": t["commands"] + [arbor_cmd, repro],
                })
    for line in lines:
        print(line)
    for v, d in report["versions"].items():
        print(f"Hudi {v}: session start {d['session_start_seconds']}s, whole run {d['wall_seconds']}s, exit {d['exit']}")
    print(f"{len(report['disagreements'])} disagreement(s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
