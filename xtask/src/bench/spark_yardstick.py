"""The Spark side of `cargo xtask bench spark`: Spark 3.5 + a Hudi bundle in local[2] doing what
arbor does in the same run, on the same input files.

  python -c "$SCRIPT" REPO HUDI_VERSION DRIVER_MEMORY INSERT.parquet UPSERT.parquet TABLE OUT KEY

One session (started as scripts/spark_peer.py starts its own: same jars, same confs) runs, timed
with time.monotonic() inside the session:
  bulk_insert  spark.read.parquet(INSERT) written as a new copy-on-write table (record key `id`,
               partition path `region`, ordering `ts`, metadata table on) with operation
               bulk_insert;
  upsert       spark.read.parquet(UPSERT) written with operation upsert;
  snapshot     the table read (format hudi), meta columns dropped, written to OUT as parquet;
  point        the table read with `id = KEY`, collected.
Untimed checks: the snapshot has as many rows as INSERT, and as many rows with ts >= 10^12 as
UPSERT; the point read finds one row. Prints one JSON object on stdout: the session start-up
seconds, each operation's seconds, the checked counts and the JVM's peak resident memory
(VmHWM, KiB). Spark's logs go to stderr.
"""
import json
import os
import sys
import tempfile
import time
import types

UPDATE_TS = 1_000_000_000_000


def jvm_peak_kib(spark):
    """The JVM's peak resident memory (VmHWM; pyspark starts it with spark-submit, which execs
    java in the same process), or None where /proc cannot tell."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (AttributeError, OSError, ValueError):
        return None
    return None


def main(argv):
    repo, version, memory, insert, upsert, table, out, key = argv[1:9]
    sys.path.insert(0, os.path.join(repo, "scripts"))
    real_stdout = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import spark_peer  # noqa: E402 (needs the path above)

    args = types.SimpleNamespace(hudi_version=version, driver_memory=memory,
                                 shuffle_partitions=2, log_level="WARN")
    bundle, utilities = spark_peer.jars_for(version, None)
    workdir = tempfile.mkdtemp(prefix="arbor-bench-spark-")
    t0 = time.monotonic()
    spark = spark_peer.start_session(args, bundle, utilities, workdir)
    spark.range(1).count()
    result = {"session": time.monotonic() - t0, "hudi": version, "spark": spark.version}

    options = {
        "hoodie.table.name": "bench",
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "true",
        "hoodie.bulkinsert.shuffle.parallelism": "2",
        "hoodie.upsert.shuffle.parallelism": "2",
        "hoodie.insert.shuffle.parallelism": "2",
    }

    def timed(name, step):
        t = time.monotonic()
        value = step()
        result[name] = time.monotonic() - t
        return value

    def write(path, operation, mode):
        df = spark.read.parquet(path)
        (df.write.format("hudi").options(**options)
         .option("hoodie.datasource.write.operation", operation).mode(mode).save(table))

    timed("bulk_insert", lambda: write(insert, "bulk_insert", "overwrite"))
    timed("upsert", lambda: write(upsert, "upsert", "append"))

    def snapshot():
        df = spark.read.format("hudi").load(table)
        data = df.drop(*[c for c in df.columns if c.startswith("_hoodie_")])
        data.write.mode("overwrite").parquet(out)

    timed("snapshot", snapshot)
    rows = timed("point", lambda: spark.read.format("hudi").load(table).where(f"id = '{key}'").collect())

    written = spark.read.parquet(out)
    result["snapshot_rows"] = written.count()
    result["snapshot_updated"] = written.where(f"ts >= {UPDATE_TS}").count()
    result["input_rows"] = spark.read.parquet(insert).count()
    result["upsert_rows"] = spark.read.parquet(upsert).count()
    result["point_rows"] = len(rows)
    result["jvm_peak_kib"] = jvm_peak_kib(spark)
    spark.stop()
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
