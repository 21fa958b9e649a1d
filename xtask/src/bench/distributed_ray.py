"""The Ray half of `cargo xtask bench distributed`: the same rows (a parquet file) written as a
bulk insert into a new table three ways, in one run: the release `arbor write` CLI as a whole
process, `arbor.Table.write` in this process, and `arbor.ray.ArborDatasink` in N Ray tasks on the
local cluster (read the parquet file, repartition, write, commit once); and, as the baseline of
what Ray itself costs, Ray's `write_parquet` through the same pipeline. Prints a Markdown
table; fails when a table does not hold every row."""

import argparse
import os
import resource
import subprocess
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import arbor


def rows(n):
    ids = pa.array(range(n), pa.int64())
    return pa.table({
        "id": pc.binary_join_element_wise(pa.scalar("k"), pc.cast(ids, pa.string()), ""),
        "part": pc.binary_join_element_wise(
            pa.scalar("p"), pc.cast(pc.remainder(ids, 10), pa.string()), ""),
        "ts": ids,
        "a": pc.multiply(ids, 3),
        "b": pc.cast(pc.divide(pc.cast(ids, pa.float64()), 7.0), pa.float64()),
        "c": pc.cast(pc.remainder(ids, 1000), pa.string()),
        "d": pc.remainder(ids, 97),
        "e": pc.cast(pc.multiply(pc.cast(ids, pa.float64()), 0.5), pa.float64()),
        "f": pc.cast(pc.remainder(ids, 13), pa.string()),
        "g": pc.subtract(ids, 5),
    })


def count(path):
    return arbor.Table(path).read(columns=["id"]).num_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arbor", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--address", required=True)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--tasks", type=int, default=8)
    args = ap.parse_args()
    data = rows(args.rows)
    source = os.path.join(args.work, "input.parquet")
    pq.write_table(data, source)
    size = os.path.getsize(source)
    results = []

    # 1. The CLI, a whole process (creating the table).
    cli_table = os.path.join(args.work, "cli")
    started = time.perf_counter()
    subprocess.run([args.arbor, "write", cli_table, source, "--op", "bulk-insert", "--type", "cow", "--key", "id",
                    "--partition-by", "part", "--ordering", "ts"], check=True,
                   stdout=subprocess.DEVNULL)
    results.append(("`arbor write` (one process, whole)", time.perf_counter() - started))

    def empty(name):
        return arbor.Table.create(os.path.join(args.work, name), data.slice(0, 0), key="id",
                                  partition_by="part", ordering="ts")

    # 2. One Python process: read the file, Table.write.
    one = empty("one")
    started = time.perf_counter()
    one.write(pq.read_table(source), op="bulk_insert")
    results.append(("`Table.write` (one process, in-process)", time.perf_counter() - started))

    # 3. Ray: read the file, repartition into N blocks, ArborDatasink (N tasks, one commit).
    import ray
    from arbor import ray as arbor_ray

    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Warm-up: the first Ray job starts the nodes' worker processes.
    ray.data.range(args.tasks * 2).repartition(args.tasks).materialize()

    # Ray's own parquet writer through the same pipeline (what Ray itself costs here), and
    # the datasink; twice each, interleaved, the faster of each reported.
    sink_tables = []
    baseline, datasink = [], []
    for run in range(2):
        started = time.perf_counter()
        ray.data.read_parquet(source).repartition(args.tasks).write_parquet(
            os.path.join(args.work, f"ray-parquet-{run}"))
        baseline.append(time.perf_counter() - started)
        sink_table = empty(f"ray-{run}")
        timeline = os.path.join(sink_table.path, ".hoodie", "timeline")

        def commits():
            names = os.listdir(timeline) if os.path.isdir(timeline) else []
            return [f for f in names if f.endswith(".commit")]

        before = len(commits())
        started = time.perf_counter()
        sink = arbor_ray.ArborDatasink(sink_table.path, op="bulk_insert")
        ray.data.read_parquet(source).repartition(args.tasks).write_datasink(sink)
        datasink.append(time.perf_counter() - started)
        if len(commits()) != before + 1:
            raise SystemExit(f"the Ray write made {len(commits()) - before} commits, not one")
        sink_tables.append(sink_table.path)
    results.append(("Ray `write_parquet` (same pipeline, no table; baseline)", min(baseline)))
    results.append((f"`ArborDatasink` ({args.tasks} Ray tasks, 2 nodes)", min(datasink)))
    for path in [cli_table, one.path] + sink_tables:
        n = count(path)
        if n != args.rows:
            raise SystemExit(f"{path} holds {n} rows, not {args.rows}")

    base = results[0][1]
    print(f"Bulk insert of {args.rows:,} rows x {data.num_columns} columns "
          f"({size / 2**20:.0f} MiB parquet, ten partitions) into a new table:")
    print()
    ray_base = next(secs for name, secs in results if "baseline" in name)
    print("| writer | time | vs `arbor write` | vs Ray `write_parquet` |")
    print("|---|---:|---:|---:|")
    for name, secs in results:
        print(f"| {name} | {secs:.2f} s | {secs / base:.2f}x | {secs / ray_base:.2f}x |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print(f"(driver process peak RSS {peak:.0f} MiB; the Ray tasks run in the nodes' workers)")


if __name__ == "__main__":
    main()
