"""Spark and arbor writing one table at once (issue 34 item 6): two Spark jobs (two Python
threads in the stage's one SparkSession, DataFrame upserts with Hudi's
ZookeeperBasedLockProvider and optimistic concurrency control) and two arbor writers (each a
sequence of `arbor --lock zk://... write` processes, the two running in parallel) upsert one
table, a bounded number of commits each. Every write either lands or fails cleanly, nothing is
lost or duplicated, and arbor and Spark read the same rows. Copy-on-write, then merge-on-read.

Locks: Hudi's ZookeeperBasedLockProvider locks the znode `<base_path>/<lock_key>`
(hoodie.write.lock.zookeeper.base_path / .lock_key) with Curator's InterProcessMutex; arbor's
`--lock zk://HOST:PORT/<base_path>?lock_key=<lock_key>` takes the same node
(crates/storage/src/lock/zookeeper.rs). ZooKeeper comes from ARBOR_TEST_ZK_URL, else from
scripts/zookeeper.sh. Each run uses a lock key of its own (stale nodes of earlier runs never
matter); `cow/lock-excludes-arbor` and `cow/lock-excludes-spark` show both engines lock the one node.

The writers and what they write (val is "<writer>/r<round>", the ordering field n is 1 in every
row, so of two writes of one key the later commit wins, in Java and in arbor):
- arbor creates the table with one seed key per writer in the writer's own partition (the
  partition is the writer's name) and the contended key `shared` in partition `shared`;
- a first, sequential Spark upsert (writer spark0) lets Spark set up what it sets up on a table
  it writes for the first time (metadata table partitions) before anything runs concurrently;
- then spark1, spark2, arbor1 and arbor2 run at once (SPARK_ROUNDS upserts per Spark writer,
  ARBOR_ROUNDS per arbor writer). Every upsert inserts
  two fresh keys `<writer>-r<round>-k0/k1` and updates its seed key, all in the writer's own
  partition (no file group in common with any other writer: such writes must never conflict).
  A *contending* upsert also updates `shared` and inserts a fresh key `<writer>-r<round>-s`
  into partition `shared`: contending writes share a file group and conflict when they overlap.
  arbor contends in every round (and retries conflicts itself, docs/concurrency.md); Spark
  contends in its first round (spark1 in every round) and does not retry. The concurrent Spark
  jobs run without inline clean (see spark_options: two Java cleaners race on one failed write);
- then one write alone: copy-on-write, a Spark upsert (writer spark9) with its inline clean
  (Java's LAZY rollback of the failed writes, `hoodie.cleaner.policy.failed.writes=LAZY`, and a
  clean over arbor's instants); merge-on-read, an arbor upsert (writer arbor9: arbor rolls back
  Spark's failed deltacommits). After it no instant may be pending.
- Copy-on-write only, before the concurrent phase: a Curator-style node held on the lock path
  (zkCli.sh) must make an arbor write wait and a Spark write fail on the lock (both engines lock
  the one znode).

Model: apply the rows of every write that landed in the order of their instants (a landed
write's instant is arbor's `--json` answer, or the `_hoodie_commit_time` of its fresh keys for
Spark); writes that overlapped on a file group cannot both have landed, so instant order is
commit order. The table must hold exactly those keys with those values.
"""

import json
import os
import re
import subprocess
import threading
import time
import uuid
from collections import Counter

import pyarrow.parquet as pq

import spark_peer
from canonical_rows import dumps
from spark_stage_lib import CheckFailed, error_text, require, table_types

HERE = os.path.dirname(os.path.abspath(__file__))

SPARK_ROUNDS = 2  # upserts per Spark writer (each takes seconds: the phase's length)
ARBOR_ROUNDS = 3  # upserts per arbor writer
SCHEMA = "id STRING, part STRING, val STRING, n BIGINT"
ZK_BASE = "/arbor-spark-stage/concurrent"
SPARK_WRITERS = ("spark1", "spark2")
ARBOR_WRITERS = ("arbor1", "arbor2")
# Rounds (0-based) in which a Spark writer also writes the contended file group.
SPARK_CONTENDS = {"spark1": {0, 1}, "spark2": {0}}
# Seconds an arbor writer waits before each of its rounds (spreads its commits over the Spark
# writes' window).
ARBOR_PAUSE = {"arbor1": 1.0, "arbor2": 1.6}
PHASE_TIMEOUT = 240  # seconds for the whole concurrent phase
ARBOR_TIMEOUT = 150  # seconds for one `arbor write` (its lock wait gives up after 120 s)

CLEAN_SPARK = re.compile(r"HoodieWriteConflictException|ConcurrentModificationException|HoodieLockException")
CLEAN_ARBOR = re.compile(r"^(commit conflict|write gave up after|table lock)")


def zk_url():
    """zk://HOST:PORT of the test ZooKeeper (ARBOR_TEST_ZK_URL, else scripts/zookeeper.sh)."""
    url = os.environ.get("ARBOR_TEST_ZK_URL")
    if url:
        return url.rstrip("/")
    r = subprocess.run(["bash", os.path.join(HERE, "zookeeper.sh")], capture_output=True, text=True, timeout=180)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines or "ARBOR_TEST_ZK_URL=" not in lines[-1]:
        raise CheckFailed(f"scripts/zookeeper.sh exited {r.returncode}: {(r.stderr or r.stdout).strip()[-800:]}")
    return lines[-1].split("=", 1)[1].strip().rstrip("/")


class Attempt:
    """One write: who, which round, its rows, and how it ended."""

    def __init__(self, writer, rnd, contending):
        self.writer = writer
        self.engine = "spark" if writer.startswith("spark") else "arbor"
        self.round = rnd
        self.contending = contending
        val = f"{writer}/r{rnd}"
        self.val = val
        self.fresh = [f"{writer}-r{rnd}-k{i}" for i in range(2)]
        self.rows = [{"id": k, "part": writer, "val": val, "n": 1} for k in self.fresh]
        self.rows.append({"id": f"{writer}-seed", "part": writer, "val": val, "n": 1})
        if contending:
            self.fresh.append(f"{writer}-r{rnd}-s")
            self.rows.append({"id": f"{writer}-r{rnd}-s", "part": "shared", "val": val, "n": 1})
            self.rows.append({"id": "shared", "part": "shared", "val": val, "n": 1})
        self.ok = None
        self.error = None
        self.instant = None
        self.start = self.end = None
        self.input = None

    @property
    def name(self):
        return f"{self.writer}/r{self.round}"

    def summary(self):
        doc = {"write": self.name, "ok": self.ok, "contending": self.contending,
               "at": [round(self.start or 0, 2), round(self.end or 0, 2)]}
        if self.instant:
            doc["instant"] = self.instant
        if self.error:
            doc["error"] = self.error[:300]
        return doc


def seed_rows():
    rows = [{"id": f"{w}-seed", "part": w, "val": "seed", "n": 1} for w in SPARK_WRITERS + ARBOR_WRITERS]
    rows.append({"id": "shared", "part": "shared", "val": "seed", "n": 1})
    return rows


def spark_options(kind, connect, port, lock_key):
    return {
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE" if kind == "cow" else "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.datasource.write.precombine.field": "n",
        "hoodie.datasource.write.hive_style_partitioning": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
        "hoodie.write.lock.zookeeper.url": connect,
        "hoodie.write.lock.zookeeper.port": str(port),
        "hoodie.write.lock.zookeeper.base_path": ZK_BASE,
        "hoodie.write.lock.zookeeper.lock_key": lock_key,
        "hoodie.write.lock.wait_time_ms": "60000",
        # No inline clean (and so no LAZY rollback of failed writes) by the concurrent Spark jobs:
        # Hudi schedules such a rollback under the lock but executes it outside, so two Spark
        # cleaners can both pick one failed write; with Hudi 1.1.1 the second then throws
        # HoodieRollbackException ("Could not delete instant ... .inflight") from a write that had
        # already committed. That race is Java's own (two Java writers); the settling write below
        # runs Spark's clean alone.
        "hoodie.clean.automatic": "false",
        "hoodie.upsert.shuffle.parallelism": "2",
        "hoodie.insert.shuffle.parallelism": "2",
    }


def table_name(path):
    """hoodie.table.name of the table at `path` (arbor makes the directory name a valid name)."""
    with open(os.path.join(path, ".hoodie", "hoodie.properties"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("hoodie.table.name="):
                return line.split("=", 1)[1].strip()
    raise CheckFailed(f"no hoodie.table.name in {path}/.hoodie/hoodie.properties")


def zk_children(host_port, path):
    """The children of znode `path` (zkCli.sh of Debian's zookeeper package), or None."""
    cli = "/usr/share/zookeeper/bin/zkCli.sh"
    if not os.path.exists(cli):
        return None
    r = subprocess.run([cli, "-server", host_port, "ls", path], capture_output=True, text=True, timeout=60)
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            inner = line[1:-1].strip()
            return [c.strip() for c in inner.split(",") if c.strip()] if inner else []
    return None


class ZkHolder:
    """Holds a ZooKeeper lock as Curator's InterProcessMutex does (an ephemeral sequential node
    `_c_<uuid>-lock-<seq>` under the lock path, with the holder's address as data), through one
    interactive zkCli.sh session; `release()` ends the session (ZooKeeper removes the node)."""

    CLI = "/usr/share/zookeeper/bin/zkCli.sh"

    def __init__(self, host_port, lock_path):
        self.lines = []
        self.p = subprocess.Popen([self.CLI, "-server", host_port], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._drain, daemon=True).start()
        parts = [x for x in lock_path.split("/") if x]
        cmds = [f"create /{'/'.join(parts[:i])} x" for i in range(1, len(parts) + 1)]
        cmds.append(f"create -s -e {lock_path}/_c_{uuid.uuid4()}-lock- 127.0.0.1")
        self.p.stdin.write("\n".join(cmds) + "\n")
        self.p.stdin.flush()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            hit = [x for x in self.lines if x.startswith(f"Created {lock_path}/_c_")]
            if hit:
                self.node = hit[0].split(" ", 1)[1].strip()
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        self.release()
        raise CheckFailed(f"zkCli.sh did not create a lock node under {lock_path}: {' | '.join(self.lines[-8:])}")

    def _drain(self):
        for line in self.p.stdout:
            self.lines.append(line.strip())

    def release(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()


def lock_probe(stage, p, path, lock_url, opts, host_port, lock_path):
    """While a Curator-style node holds `lock_path`, an `arbor --lock zk://...` write waits and a
    Spark write with a short lock wait fails on the lock; released, the arbor write lands. Checks
    `lock-excludes-arbor` and `lock-excludes-spark`; returns the two writes (for the model)."""
    a = stage.arbor
    arb = Attempt("probe", 0, False)
    spk = Attempt("sprobe", 0, False)
    arb.input = a.jsonl(arb.rows)
    sopts = dict(opts)
    sopts.update({"hoodie.write.lock.wait_time_ms": "2000", "hoodie.write.lock.num_retries": "0",
                  "hoodie.write.lock.client.num_retries": "0",
                  "hoodie.write.lock.client.wait_time_ms_between_retry": "500"})
    seen = {}

    def spark_probe():
        t = time.monotonic()
        try:
            stage.spark_write(path, spk.rows, SCHEMA, sopts)
            spk.ok = True
        except Exception as e:  # judged by lock-excludes-spark
            spk.ok, spk.error = False, error_text(e)
        spk.end = time.monotonic() - t

    try:
        holder = ZkHolder(host_port, lock_path)
    except Exception as e:  # both checks fail with the reason
        seen["error"] = error_text(e)
        holder = None
    proc = None
    if holder is not None:
        try:
            t0 = time.monotonic()
            cmd = [a.exe, "--lock", lock_url, "write", path, arb.input, "--json"]
            a.log.append(" ".join(cmd))
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            th = threading.Thread(target=spark_probe, daemon=True)
            th.start()
            th.join(90)
            time.sleep(max(0.0, 4.0 - (time.monotonic() - t0)))
            seen["arbor_waiting_after"] = round(time.monotonic() - t0, 1)
            seen["arbor_waiting"] = proc.poll() is None
            seen["holder"] = holder.node
        finally:
            holder.release()
    if proc is not None:
        try:
            out, err = proc.communicate(timeout=ARBOR_TIMEOUT)
            seen["arbor_exit"] = proc.returncode
            seen["arbor_done_after_release"] = round(time.monotonic() - t0 - seen["arbor_waiting_after"], 1)
            if proc.returncode == 0:
                arb.ok, arb.instant = True, json.loads(out).get("instant")
            else:
                arb.ok, arb.error = False, f"exit {proc.returncode}: {(out or err).strip()[-600:]}"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            arb.ok, arb.error = False, f"no answer {ARBOR_TIMEOUT} s after the lock was released"

    def excludes_arbor():
        require("error" not in seen, f"could not hold the lock node: {seen.get('error')}")
        require(seen["arbor_waiting"], f"arbor's write finished ({arb.ok}, {arb.error or arb.instant}) within "
                f"{seen['arbor_waiting_after']} s while {seen['holder']} held the lock")
        require(arb.ok, f"arbor's write failed after the lock was released: {arb.error}")
        return {k: v for k, v in seen.items() if k.startswith("arbor")}

    def excludes_spark():
        require("error" not in seen, f"could not hold the lock node: {seen.get('error')}")
        require(spk.ok is False, f"Spark's write {'succeeded' if spk.ok else 'did not finish'} while "
                f"{seen['holder']} held the lock")
        require(re.search(r"HoodieLockException|[Uu]nable to acquire lock", spk.error or ""),
                f"Spark's write failed, but not on the lock: {spk.error}")
        return {"spark_failed_after": round(spk.end, 1), "spark_error": spk.error[:300]}

    stage.check(p + "lock-excludes-arbor", excludes_arbor)
    stage.check(p + "lock-excludes-spark", excludes_spark)
    return [arb, spk]


def run(stage):
    zk = {}

    def zookeeper():
        url = zk_url()
        m = re.match(r"^zk://([^/?]+)$", url)
        require(m, f"cannot use {url!r}: expected zk://HOST:PORT[,HOST:PORT...]")
        zk["url"] = url
        zk["connect"] = m.group(1)  # Curator's connect string (hoodie.write.lock.zookeeper.url)
        zk["first"] = m.group(1).split(",")[0]  # for zkCli.sh
        return {"url": url}

    if not stage.check("zookeeper", zookeeper):
        return
    first = zk["first"]
    port = int(first.rsplit(":", 1)[1]) if ":" in first else 2181
    for kind in table_types(stage, "concurrent"):
        scenario_table(stage, kind, zk["url"], zk["connect"], first, port)


def scenario_table(stage, kind, url, connect, host_port, port):
    a = stage.arbor
    path = stage.path(kind)
    lock_key = f"{os.path.basename(path)}_{stage.hudi.replace('.', '')}_{os.getpid()}_{int(time.time())}"
    lock_url = f"{url}{ZK_BASE}?lock_key={lock_key}"
    opts = spark_options(kind, connect, port, lock_key)
    p = f"{kind}/"

    # -- the table: arbor creates it, Spark writes it once alone --------------------------------
    warm = Attempt("spark0", 0, True)

    def setup():
        f = a.jsonl(seed_rows())
        a("--lock", lock_url, "write", path, f, "--json", "--type", kind, "--key", "id",
          "--partition-by", "part", "--ordering", "n", "--table-version", stage.table_version)
        opts["hoodie.table.name"] = table_name(path)
        warm.start = time.monotonic()
        stage.spark_write(path, warm.rows, SCHEMA, opts)
        warm.end = time.monotonic()
        warm.ok = True
        return {"lock": lock_url, "spark_first_write_seconds": round(warm.end - warm.start, 1)}

    if not stage.check(p + "setup", setup):
        return

    # -- the lock node: a Curator-style holder of <base_path>/<lock_key> excludes both ---------
    pre = [warm]
    if kind == "cow":
        pre += lock_probe(stage, p, path, lock_url, opts, host_port, f"{ZK_BASE}/{lock_key}")

    # -- the concurrent phase ------------------------------------------------------------------
    attempts = {w: [Attempt(w, r, r in SPARK_CONTENDS[w]) for r in range(SPARK_ROUNDS)] for w in SPARK_WRITERS}
    for w in ARBOR_WRITERS:
        attempts[w] = [Attempt(w, r, True) for r in range(ARBOR_ROUNDS)]
        for at in attempts[w]:
            at.input = a.jsonl(at.rows)  # written here: Arbor.jsonl is not thread-safe
    t0 = time.monotonic()

    def spark_writer(w):
        for at in attempts[w]:
            at.start = time.monotonic() - t0
            try:
                stage.spark_write(path, at.rows, SCHEMA, opts)
                at.ok = True
            except Exception as e:  # the write's outcome, judged by the checks below
                at.ok, at.error = False, error_text(e)
            at.end = time.monotonic() - t0

    def arbor_writer(w):
        for at in attempts[w]:
            time.sleep(ARBOR_PAUSE[w])
            at.start = time.monotonic() - t0
            cmd = [a.exe, "--lock", lock_url, "write", path, at.input, "--json"]
            a.log.append(" ".join(cmd))
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=ARBOR_TIMEOUT)
                doc = {}
                try:
                    doc = json.loads(r.stdout) if r.stdout.strip() else {}
                except ValueError:
                    pass
                if r.returncode == 0:
                    at.ok, at.instant = True, doc.get("instant")
                else:
                    at.ok = False
                    at.error = f"exit {r.returncode}: " + (doc.get("error") or (r.stderr or r.stdout).strip()[-600:])
            except subprocess.TimeoutExpired:
                at.ok, at.error = False, f"timeout: no answer after {ARBOR_TIMEOUT} s"
            at.end = time.monotonic() - t0

    threads = [threading.Thread(target=spark_writer, args=(w,), daemon=True) for w in SPARK_WRITERS]
    threads += [threading.Thread(target=arbor_writer, args=(w,), daemon=True) for w in ARBOR_WRITERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, PHASE_TIMEOUT - (time.monotonic() - t0)))
    phase_seconds = round(time.monotonic() - t0, 1)
    every = [at for w in SPARK_WRITERS + ARBOR_WRITERS for at in attempts[w]]

    def finished():
        stuck = [at.name for at in every if at.ok is None]
        require(not stuck, f"writes still running after {PHASE_TIMEOUT} s: {stuck}")
        return {"seconds": phase_seconds, "writes": [at.summary() for at in every]}

    if not stage.check(p + "finished", finished):
        return

    def overlapped():
        # At least one Spark write and one arbor write were in flight at the same time.
        pairs = [(s.name, r.name) for s in every if s.engine == "spark" for r in every
                 if r.engine == "arbor" and r.start < s.end and s.start < r.end]
        require(pairs, "no Spark write overlapped an arbor write in time: "
                + dumps([[at.name, round(at.start, 2), round(at.end, 2)] for at in every]))
        return {"overlapping_pairs": len(pairs)}

    stage.check(p + "overlap", overlapped)

    def clean_failures():
        bad = []
        for at in every:
            if at.ok:
                continue
            if at.engine == "spark":
                clean = CLEAN_SPARK.search(at.error)
            else:
                clean = at.error.startswith("exit 1: ") and CLEAN_ARBOR.search(at.error[len("exit 1: "):])
            if not clean:
                bad.append(f"{at.name}: {at.error[:600]}")
        require(not bad, "writes failed with something other than a conflict or a lock timeout: " + " || ".join(bad))
        return {"failed": [at.name for at in every if not at.ok]}

    stage.check(p + "clean-failures", clean_failures)

    def arbor_landed():
        failed = [f"{at.name}: {at.error[:600]}" for at in every if at.engine == "arbor" and not at.ok]
        require(not failed, "arbor writes failed (arbor retries conflicts): " + " || ".join(failed))

    stage.check(p + "arbor-landed", arbor_landed)

    def disjoint_landed():
        failed = [f"{at.name}: {at.error[:600]}" for at in every if not at.contending and not at.ok]
        require(not failed, "writes sharing no file group with any other writer failed: " + " || ".join(failed))
        return {"disjoint_writes": sum(1 for at in every if not at.contending)}

    stage.check(p + "disjoint-landed", disjoint_landed)

    # -- settling: one write alone. Copy-on-write: a Spark write with its inline clean (Java's
    # LAZY rollback of the failed writes, whose heartbeats are gone, and a clean over arbor's
    # instants); merge-on-read: an arbor write (arbor rolls back Spark's failed deltacommits).
    settle = Attempt("spark9" if kind == "cow" else "arbor9", 0, True)
    post = [settle]

    def settled():
        if settle.engine == "spark":
            sopts = dict(opts)
            sopts["hoodie.clean.automatic"] = "true"
            try:
                stage.spark_write(path, settle.rows, SCHEMA, sopts)
                settle.ok = True
            except Exception as e:
                settle.ok, settle.error = False, error_text(e)
                raise
        else:
            try:
                out = a("--lock", lock_url, "write", path, a.jsonl(settle.rows), "--json").stdout
                settle.instant = json.loads(out).get("instant")
                settle.ok = True
            except Exception as e:
                settle.ok, settle.error = False, error_text(e)
                raise
        completed, pending = spark_peer.timeline_instants(path)
        return {"writer": settle.writer, "pending_after": sorted(pending - completed)}

    stage.check(p + "settle", settled)

    # -- what the table holds ------------------------------------------------------------------
    reads = {}

    def spark_rows():
        reads["spark"] = stage.spark_read(path, meta=True)["rows"]
        return {"rows": len(reads["spark"])}

    def arbor_rows():
        out = os.path.join(stage.work, f"concurrent-{kind}-read.parquet")
        if os.path.exists(out):
            os.remove(out)
        a("read", path, "--meta", "--format", "parquet", "--output", out)
        reads["arbor"] = pq.read_table(out).to_pylist()
        return {"rows": len(reads["arbor"])}

    stage.check(p + "spark-read", spark_rows)
    stage.check(p + "arbor-read", arbor_rows)

    # Instants of the writes that landed: arbor's answer; for Spark, the commit time of its fresh
    # keys in either read (the instant order decides what the contended and seed keys hold).
    landed = [at for at in pre + every + post if at.ok]
    for at in landed:
        if at.instant:
            continue
        for rows in reads.values():
            times = {r.get("_hoodie_commit_time") for r in rows if r["id"] in at.fresh}
            if len(times) == 1:
                at.instant = times.pop()
                break
    model = {r["id"]: (r["part"], r["val"]) for r in seed_rows()}
    for at in sorted(landed, key=lambda x: (x.instant or "~", x.end or 0)):
        for r in at.rows:
            model[r["id"]] = (r["part"], r["val"])
    failed_keys = {k: at.name for at in pre + every + post if not at.ok for k in at.fresh}
    who = {at.val: at.name + (f"@{at.instant}" if at.instant else "") for at in landed}

    for reader in ("spark", "arbor"):
        def no_loss(reader=reader):
            require(reader in reads, f"no {reader} read")
            have = {r["id"] for r in reads[reader]}
            lost = sorted(set(model) - have)
            require(not lost, f"{len(lost)} keys of landed writes missing from {reader}'s read: {lost[:20]}")

        def no_dup(reader=reader):
            require(reader in reads, f"no {reader} read")
            dup = {k: n for k, n in Counter(r["id"] for r in reads[reader]).items() if n > 1}
            require(not dup, f"keys read more than once by {reader}: {dumps(dup)[:800]}")

        def no_extra(reader=reader):
            require(reader in reads, f"no {reader} read")
            extra = sorted({r["id"] for r in reads[reader]} - set(model))
            require(not extra, f"{reader} reads keys no landed write wrote: "
                    + dumps({k: failed_keys.get(k, "unknown writer") for k in extra})[:1200])

        def values(reader=reader):
            require(reader in reads, f"no {reader} read")
            wrong = {}
            for r in reads[reader]:
                want = model.get(r["id"])
                if want is not None and [r["part"], r["val"], r["n"]] != [want[0], want[1], 1]:
                    wrong[r["id"]] = {"read": [r["part"], r["val"], r["n"], r.get("_hoodie_commit_time")],
                                      "expected": want, "expected_from": who.get(want[1], want[1])}
            require(not wrong, f"{reader} reads values other than the last landed write's: {dumps(wrong)[:1500]}")
            return {"shared": model["shared"][1]}

        stage.check(f"{p}{reader}/no-loss", no_loss)
        stage.check(f"{p}{reader}/no-dup", no_dup)
        stage.check(f"{p}{reader}/no-extra", no_extra)
        stage.check(f"{p}{reader}/values", values)

    stage.agree(p + "agree", path, expect_rows=len(model))

    # -- the timeline --------------------------------------------------------------------------
    def landed_completed():
        completed, _ = spark_peer.timeline_instants(path)
        missing = [at.name for at in landed if not at.instant or at.instant not in completed]
        require(not missing, f"landed writes whose instant is not completed on the timeline: {missing}")
        tl = a.timeline(path)
        done = [i for i in tl if i.get("state") == "COMPLETED" and i.get("action") in ("commit", "deltacommit")]
        # Table services Spark ran inline (a merge-on-read compaction) are commits too.
        services = [i for i in done if i.get("operation") in ("COMPACT", "LOG_COMPACT", "CLUSTER")]
        commits = [i for i in done if i not in services]
        want = len(landed) + 1  # + arbor's creating write
        require(len(commits) == want, f"{len(commits)} completed write commits, expected {want} (the create, "
                f"{len(landed)} landed writes): {dumps([[i['timestamp'], i['action']] for i in commits])}")
        return {"commits": len(commits), "table_services": [[i["timestamp"], i.get("operation")] for i in services]}

    stage.check(p + "timeline-commits", landed_completed)

    def no_stray_pending():
        # After the settling write (Spark's LAZY clean of failed writes), no instant may be left
        # pending: not by a writer that landed, not by one that failed, not a rollback.
        completed, pending = spark_peer.timeline_instants(path)
        stray = sorted(pending - completed)
        require(not stray, f"pending instants left on the timeline: {stray}")

    stage.check(p + "no-stray-pending", no_stray_pending)

    def lock_released():
        kids = zk_children(host_port, f"{ZK_BASE}/{lock_key}")
        require(kids is not None, f"cannot list znode {ZK_BASE}/{lock_key} (zkCli.sh missing, or the node is absent)")
        require(not kids, f"lock nodes left under {ZK_BASE}/{lock_key} after every writer finished: {kids}")

    stage.check(p + "lock-released", lock_released)
    stage.validates(p + "validate", path)
    stage.java_validates(p + "java-mdt", path)
