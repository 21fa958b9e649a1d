"""Distributed writes from Python: Table.begin_write, WriteTransaction.write_fragment in other
processes (the transaction and the fragments pickled), commit once; abort; refusals."""

import multiprocessing
import pickle

import pyarrow as pa
import pytest

import arbor


def trips(ids, fare, ts=1):
    ids = list(ids)
    return pa.table(
        {
            "uuid": [f"u{i:04}" for i in ids],
            "city": ["sf" if i % 2 == 0 else "nyc" for i in ids],
            "fare": [float(fare + i) for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
        }
    )


def rows(table):
    t = table.read(columns=["uuid", "city", "fare", "ts"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ["uuid", "city", "fare", "ts"])))


def make(tmp_path, name, table_type):
    return arbor.Table.create(
        str(tmp_path / name), trips(range(20), 1.0), key="uuid", partition_by="city",
        ordering="ts", table_type=table_type,
    )


def _write_in_worker(args):
    transaction, data = args
    return transaction.write_fragment(data, task=None)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_fragments_of_worker_processes_equal_one_write(tmp_path, table_type):
    ours, twin = make(tmp_path, "ours", table_type), make(tmp_path, "twin", table_type)
    new = trips(range(20, 50), 2.0, ts=2)
    txn = ours.begin_write("bulk_insert")
    parts = [new.slice(0, 10), new.slice(10, 10), new.slice(20, 10)]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        fragments = pool.map(_write_in_worker, [(txn, p) for p in parts])
    assert all(isinstance(f, arbor.Fragment) for f in fragments)
    assert sum(f.info["inserted"] for f in fragments) == 30
    assert pickle.loads(pickle.dumps(fragments[0])).to_bytes() == fragments[0].to_bytes()
    commit = txn.commit(fragments)
    assert commit["inserted"] == 30
    twin.write(new, op="bulk_insert")
    assert rows(ours) == rows(twin)
    # Upserts routed by partition (one fragment per city: each file group in one fragment).
    changed = trips(range(0, 30, 3), 9.0, ts=3)
    txn = ours.begin_write("upsert")
    fragments = [
        txn.write_fragment(changed.filter(pa.compute.equal(changed["city"], c)), task=i)
        for i, c in enumerate(["sf", "nyc"])
    ]
    assert txn.commit(fragments)["updated"] == 10
    twin.write(changed, op="upsert")
    assert rows(ours) == rows(twin)


def test_abort_and_refusals_leave_the_table_as_it_was(tmp_path):
    t = make(tmp_path, "t", "cow")
    before = rows(t)
    txn = t.begin_write("upsert")
    txn.write_fragment(trips(range(100, 105), 1.0), task=0)
    txn.abort()
    assert rows(t) == before
    # A worker's copy cannot commit.
    txn = t.begin_write("upsert")
    copy = pickle.loads(pickle.dumps(txn))
    f = copy.write_fragment(trips(range(100, 102), 1.0), task=0)
    with pytest.raises(arbor.ArborError, match="coordinator"):
        copy.commit([f])
    # One key in two fragments is refused; nothing is committed.
    g = copy.write_fragment(trips(range(101, 103), 1.0), task=1)
    with pytest.raises(arbor.ArborError, match="same record key"):
        txn.commit([f, g])
    assert rows(t) == before
    with pytest.raises(arbor.ArborError, match="already committed or aborted"):
        txn.commit([f])
    # Leaving a with block by an exception aborts the write.
    with pytest.raises(RuntimeError):
        with t.begin_write("insert") as txn:
            txn.write_fragment(trips(range(200, 201), 1.0))
            raise RuntimeError("a worker failed")
    assert rows(t) == before
    with pytest.raises(ValueError, match="op"):
        t.begin_write("merge")
    with pytest.raises(ValueError, match="fragment"):
        arbor.Fragment(b"nope").info
