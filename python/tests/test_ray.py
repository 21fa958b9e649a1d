"""arbor.ray on a real Ray cluster (scripts/ray.sh starts a head and a worker node on
127.0.0.1; ARBOR_TEST_RAY_ADDRESS names it): reads of a branch, a tag and an as-of equal
Table.read; 2 million rows written through ArborDatasink in 8 tasks land as one commit that
hudi-rs reads; a failing task commits nothing."""

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import arbor

ADDRESS = os.environ.get("ARBOR_TEST_RAY_ADDRESS")
if not ADDRESS:
    if os.environ.get("CI"):
        raise RuntimeError("ARBOR_TEST_RAY_ADDRESS is not set (scripts/python.sh starts the cluster)")
    pytest.skip("no Ray cluster (run scripts/ray.sh and export ARBOR_TEST_RAY_ADDRESS)",
                allow_module_level=True)

ray = pytest.importorskip("ray")
import arbor.ray  # noqa: E402  (needs ray)

COLUMNS = ["uuid", "city", "fare", "ts"]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address=ADDRESS, logging_level="ERROR", log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def trips(ids, fare, ts=1):
    ids = list(ids)
    return pa.table(
        {
            "uuid": pa.array([f"u{i:07}" for i in ids], pa.string()),
            "city": pa.array(["sf" if i % 2 == 0 else "nyc" for i in ids], pa.string()),
            "fare": pa.array([float(fare + i) for i in ids], pa.float64()),
            "ts": pa.array([ts] * len(ids), pa.int64()),
        }
    )


def canonical(table, columns=COLUMNS):
    return table.select(columns).sort_by([("uuid", "ascending")])


def ray_rows(ds, columns=COLUMNS):
    return canonical(pa.concat_tables(ray.get(ds.to_arrow_refs())), columns)


def data_files(path):
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out += [os.path.join(root, f) for f in files if f.endswith(".parquet") or ".log." in f]
    return sorted(out)


def test_read_a_branch_a_tag_and_an_as_of_as_table_read(tmp_path):
    t = arbor.Table.create(str(tmp_path / "t"), trips(range(200), 1.0), key="uuid",
                           partition_by="city", ordering="ts", table_type="mor")
    first = t.read(columns=["_hoodie_commit_time"]).column(0)[0].as_py()
    t.tag("v1")
    t.write(trips(range(100, 300), 2.0, ts=2), op="upsert")
    t.branch("dev")
    t.write(trips(range(0, 50), 3.0, ts=3), op="upsert", branch="dev")
    cases = [
        {}, {"branch": "dev"}, {"tag": "v1"}, {"as_of": first},
        {"branch": "dev", "columns": ["uuid", "fare"], "filter": "city = sf"},
    ]
    for case in cases:
        columns = case.get("columns", COLUMNS)
        ours = ray_rows(arbor.ray.read_arbor(t.path, override_num_blocks=4, **case), columns)
        expected = canonical(t.read(**case), columns)
        assert ours.equals(expected), case
    assert arbor.ray.read_arbor(t.path, tag="v1").count() == 200


def test_datasink_writes_two_million_rows_in_eight_tasks_as_one_commit(tmp_path):
    t = arbor.Table.create(str(tmp_path / "big"), trips(range(0), 0.0), key="uuid",
                           partition_by="city", ordering="ts", table_type="cow")
    data = trips(range(2_000_000), 0.5)
    ds = ray.data.from_arrow(data).repartition(8)
    sink = arbor.ray.ArborDatasink(t.path, op="bulk_insert")
    ds.write_datasink(sink)
    commits = [f for f in os.listdir(os.path.join(t.path, ".hoodie", "timeline"))
               if f.endswith(".commit")]
    assert len(commits) == 1, commits
    got = canonical(t.read(columns=COLUMNS))
    assert got.num_rows == 2_000_000
    assert got.equals(canonical(data))
    peer = os.environ.get("ARBOR_PEER_PYTHON")
    if peer:
        import subprocess
        script = (
            "import sys, pyarrow as pa, pyarrow.compute as pc;"
            "from hudi import HudiReadOptions, HudiTable;"
            "t = pa.Table.from_batches(HudiTable(sys.argv[1]).read(HudiReadOptions()));"
            "print(t.num_rows, pc.count_distinct(t['uuid']).as_py(), pc.sum(t['fare']).as_py())"
        )
        out = subprocess.run([peer, "-c", script, t.path], capture_output=True, text=True,
                             check=True).stdout.split()
        assert (int(out[0]), int(out[1])) == (2_000_000, 2_000_000)
        assert float(out[2]) == pytest.approx(pc.sum(data["fare"]).as_py())


def test_a_failing_task_commits_nothing(tmp_path):
    t = arbor.Table.create(str(tmp_path / "t"), trips(range(10), 1.0), key="uuid",
                           partition_by="city", ordering="ts", table_type="mor")
    before = canonical(t.read(columns=COLUMNS))
    files_before = data_files(t.path)

    def fail_on_one_block(batch):  # pickled by value: the workers do not import this module
        if "u0000500" in batch["uuid"].to_pylist():
            raise RuntimeError("this task fails")
        return batch

    # Four tasks write their fragments; the fifth (the same fused task maps and writes)
    # fails.
    rows = pa.concat_tables([trips(range(1000, 3000), 2.0), trips(range(500, 501), 2.0)])
    ds = ray.data.from_arrow(rows).repartition(5).map_batches(
        fail_on_one_block, batch_format="pyarrow")
    with pytest.raises(Exception, match="this task fails"):
        ds.write_datasink(arbor.ray.ArborDatasink(t.path, op="insert"))
    assert canonical(t.read(columns=COLUMNS)).equals(before)
    assert data_files(t.path) == files_before
    timeline = os.listdir(os.path.join(t.path, ".hoodie", "timeline"))
    assert not [f for f in timeline if f.endswith(".requested") and "deltacommit" in f
                and not any(g.startswith(f.split(".")[0]) and g.endswith(".deltacommit")
                            for g in timeline)]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_write_arbor_routes_upserts_and_deletes_to_one_task_per_file_group(tmp_path, table_type):
    ours, twin = (
        arbor.Table.create(str(tmp_path / name), trips(range(0), 0.0), key="uuid",
                           partition_by="city", ordering="ts", table_type=table_type)
        for name in ("ours", "twin")
    )
    for t in (ours, twin):
        for i in range(3):  # six file groups in two partitions
            t.write(trips(range(i * 20_000, (i + 1) * 20_000), float(i)), op="bulk_insert")
    changes = trips(range(0, 80_000, 3), 7.0, ts=2)
    commit = arbor.ray.write_arbor(ray.data.from_arrow(changes), ours.path, op="upsert",
                                   num_tasks=4)
    single = twin.write(changes, op="upsert")
    assert (commit["inserted"], commit["updated"]) == (single["inserted"], single["updated"])
    assert canonical(ours.read()).equals(canonical(twin.read()))
    gone = trips(range(1, 60_000, 5), 0.0)
    commit = arbor.ray.write_arbor(ray.data.from_arrow(gone), ours.path, op="delete",
                                   num_tasks=3)
    assert commit["deleted"] == twin.write(gone, op="delete")["deleted"]
    assert canonical(ours.read()).equals(canonical(twin.read()))
    # On a branch too.
    ours.branch("dev")
    twin.branch("dev")
    more = trips(range(100, 200), 9.0, ts=3)
    arbor.ray.write_arbor(ray.data.from_arrow(more), ours.path, op="upsert", branch="dev",
                          num_tasks=2)
    twin.write(more, op="upsert", branch="dev")
    assert canonical(ours.read(branch="dev")).equals(canonical(twin.read(branch="dev")))
    assert canonical(ours.read()).equals(canonical(twin.read()))
