"""pytest for the Python package: read/write/branch/tag/publish/clean/TTL/clone round trips,
pandas and polars input, errors."""

import datetime
import decimal

import pyarrow as pa
import pytest

import arbor


def trips(ids, fare, city=None, ts=1):
    ids = list(ids)
    return pa.table(
        {
            "uuid": [f"u{i:03}" for i in ids],
            "city": [city or ("sf" if i % 2 == 0 else "nyc") for i in ids],
            "fare": [float(fare + i) for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
        }
    )


def sorted_rows(table, columns=("uuid", "city", "fare")):
    return sorted(zip(*(table.column(c).to_pylist() for c in columns)))


@pytest.fixture(params=["cow", "mor", "lance-mor"])
def table(tmp_path, request):
    # "lance-mor": a merge-on-read table with Lance base files (Hudi 1.2).
    table_type = request.param.removeprefix("lance-")
    base_format = "lance" if request.param.startswith("lance-") else "parquet"
    return arbor.Table.create(
        str(tmp_path / f"trips_{request.param.replace('-', '_')}"), trips(range(10), 1.0), key="uuid",
        partition_by="city", ordering="ts", table_type=table_type, base_format=base_format,
    )


def test_base_format_lance_files_and_bad_value(tmp_path):
    t = arbor.Table.create(str(tmp_path / "l"), trips(range(4), 1.0), key="uuid", base_format="lance")
    assert t.read().num_rows == 4
    names = [p.name for p in (tmp_path / "l").rglob("*") if p.is_file() and ".hoodie" not in p.parts]
    assert names and all(n.endswith(".lance") for n in names if not n.startswith(".hoodie")), names
    with pytest.raises(Exception, match="base_format"):
        arbor.Table.create(str(tmp_path / "o"), trips(range(4), 1.0), key="uuid", base_format="orc")


def test_create_write_read_round_trip(table):
    got = table.read()
    assert got.num_rows == 10
    assert got.schema.names[:5] == [
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
        "_hoodie_partition_path", "_hoodie_file_name",
    ]
    commit = table.write(trips(range(5, 15), 100.0, ts=2), op="upsert")
    assert (commit["inserted"], commit["updated"]) == (5, 5)
    got = table.read(columns=["uuid", "fare"], filter="uuid >= u012")
    assert sorted(got.column("fare").to_pylist()) == [112.0, 113.0, 114.0]
    assert table.read(filter=["city = sf", "fare > 100"]).num_rows == 5
    streamed = table.read_batches(columns=["uuid"]).read_all()
    assert streamed.num_rows == 15
    # Reopening by path sees the same table.
    assert arbor.Table(table.path).read().num_rows == 15


def test_branch_tag_publish_and_time_travel(table):
    first = table.read(columns=["_hoodie_commit_time"]).column(0)[0].as_py()
    # Incremental ranges bound completion times: start after the tagged write completed.
    done = table.write(trips(range(3), 1.0))["completion_time"]
    table.tag("v1")
    assert [t["name"] for t in table.tags()] == ["v1"]
    table.branch("audit")
    table.write(trips(range(100, 103), 5.0), branch="audit")
    assert table.read().num_rows == 10
    assert table.read(branch="audit").num_rows == 13
    assert [b["name"] for b in table.branches()] == ["audit"]
    out = table.publish("audit", drop=True)
    assert out["publication"] == 1
    assert table.branches() == []
    assert table.read().num_rows == 13
    assert table.read(tag="v1").num_rows == 10
    assert table.read(as_of=first).num_rows == 10
    inc = table.read(incremental=(done, None), columns=["uuid"])
    assert sorted(inc.column("uuid").to_pylist()) == ["u100", "u101", "u102"]
    table.drop_tag("v1")
    assert table.tags() == []


def test_clean_keeps_what_a_tag_reads(table):
    table.tag("v1")
    for n in range(4):
        table.write(trips(range(10), 10.0 * (n + 2), ts=n + 2))
    before = sorted_rows(table.read(tag="v1"))
    dry = table.clean(retain=1, dry_run=True)
    assert dry["deleted"] == 0
    out = table.clean(retain=1)
    if "cow" in table.path:
        # Copy-on-write rewrites base files: the older versions are gone.
        assert out["deleted"] >= 1
    assert sorted_rows(table.read(tag="v1")) == before
    assert sorted(table.read().column("fare").to_pylist())[0] == 50.0


def test_ttl_and_clone(table, tmp_path):
    table.set_ttl("count", "1")
    out = table.run_ttl(dry_run=True)
    assert out["expired"] == ["city=nyc"] and out["instant"] is None
    out = table.run_ttl()
    assert out["expired"] == ["city=nyc"] and out["instant"] is not None
    assert set(table.read().column("city").to_pylist()) == {"sf"}
    clone = table.clone(str(tmp_path / "lab"))
    clone.write(trips(range(50, 52), 1.0, city="sf"))
    assert clone.read().num_rows == 7
    assert table.read().num_rows == 5


def test_pandas_and_polars_input(table):
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    df = pd.DataFrame(
        {"uuid": ["p1", "p2"], "city": ["sf", "sf"], "fare": [1.5, 2.5], "ts": [3, 3]},
        index=[7, 9],
    )
    table.write(df, op="insert")
    pf = pl.DataFrame({"uuid": ["q1"], "city": ["la"], "fare": [9.0], "ts": [4]})
    table.write(pf)
    got = {r[0]: r for r in sorted_rows(table.read())}
    assert got["p2"] == ("p2", "sf", 2.5)
    assert got["q1"] == ("q1", "la", 9.0)
    assert "__index_level_0__" not in table.schema().names


def test_awkward_types_round_trip(tmp_path):
    data = pa.table(
        {
            "id": ["a", "b", "c"],
            "ts_tz": pa.array(
                [datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc), None,
                 datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)],
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array([decimal.Decimal("12.50"), None, decimal.Decimal("-0.01")], pa.decimal128(12, 2)),
            "tags": pa.array([["x", "y"], None, []], pa.list_(pa.string())),
            "info": pa.array([{"k": 1}, None, {"k": None}], pa.struct([("k", pa.int32())])),
            "day": pa.array([datetime.date(2024, 2, 29), None, datetime.date(1, 1, 1)], pa.date32()),
        }
    )
    t = arbor.Table.create(str(tmp_path / "awk"), data, key="id", table_type="mor")
    got = t.read(columns=data.schema.names).sort_by("id")
    assert got.to_pylist() == data.to_pylist()
    assert t.read(filter="amount = 12.5").column("id").to_pylist() == ["a"]
    assert t.read(filter="ts_tz IS NULL").column("id").to_pylist() == ["b"]


def test_bulk_insert_streams_a_reader_batch_by_batch(table):
    # A reader of many batches, each produced only when asked: the bulk insert streams it
    # (Table::write_stream); every row lands once, as one commit.
    def batches():
        for start in range(100, 400, 50):
            yield from trips(range(start, start + 50), 5.0, ts=3).to_batches()

    schema = trips(range(1), 1.0).schema
    commit = table.write(pa.RecordBatchReader.from_batches(schema, batches()), op="bulk_insert")
    assert (commit["inserted"], commit["updated"]) == (300, 0)
    got = table.read(columns=["uuid", "fare"])
    assert got.num_rows == 310
    assert table.read(filter="uuid = u250").column("fare").to_pylist() == [255.0]

    # A bad batch (a null key) after good ones fails the whole write, naming the batch;
    # nothing lands.
    def bad_batches():
        yield from trips(range(500, 510), 1.0).to_batches()
        yield pa.record_batch(
            [pa.array([None], pa.string()), pa.array(["sf"]), pa.array([1.0]), pa.array([1], pa.int64())],
            schema=schema,
        )

    with pytest.raises(arbor.ArborError) as e:
        table.write(pa.RecordBatchReader.from_batches(schema, bad_batches()), op="bulk_insert")
    assert "batch 1" in str(e.value) and table.path in str(e.value)
    assert table.read().num_rows == 310


def test_bad_input_raises_with_the_cli_message(table):
    before = table.read().num_rows
    bad = pa.table({"uuid": ["z"], "city": ["sf"], "fare": ["not a number"], "ts": [1]})
    with pytest.raises(arbor.ArborError) as e:
        table.write(bad)
    assert "fare" in str(e.value) and table.path in str(e.value)
    with pytest.raises(arbor.ArborError) as e:
        table.read(tag="nope")
    assert "nope" in str(e.value)
    with pytest.raises(arbor.ArborError) as e:
        table.read(columns=["tip"])
    assert "tip" in str(e.value)
    with pytest.raises(ValueError):
        table.write(trips(range(1), 1.0), op="merge")
    with pytest.raises(TypeError):
        table.write([1, 2, 3])
    with pytest.raises(arbor.ArborError):
        arbor.Table(str(table.path) + "-missing")
    assert table.read().num_rows == before
