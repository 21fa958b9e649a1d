"""arbor: Apache Hudi tables with Git-like branches and tags, partition TTL and shallow clones.

    import arbor, pyarrow as pa
    t = arbor.Table.create("./trips", pa.table({...}), key=["uuid"], partition_by=["city"],
                           ordering="ts", table_type="mor")
    t.write(polars_or_pandas_or_pyarrow_data, op="upsert")
    t.branch("audit"); t.write(more, branch="audit"); t.publish("audit")
    t.tag("v1"); t.read(tag="v1", columns=["uuid", "fare"], filter="city = sf")

Data goes in as anything with ``__arrow_c_stream__`` (pyarrow Table / RecordBatchReader,
polars and pandas DataFrames) and comes out as ``pyarrow.Table`` (``read``) or
``pyarrow.RecordBatchReader`` (``read_batches``). Every failure raises ``ArborError`` with the
message the ``arbor`` CLI prints.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

import random

from arbor._native import ArborError, __version__
from arbor._native import Table as _NativeTable
from arbor._native import begin_write as _begin_write
from arbor._native import fragment_info as _fragment_info
from arbor._native import route as _route
from arbor._native import write_fragment as _write_fragment

__all__ = ["Table", "WriteTransaction", "Fragment", "ArborError", "__version__"]

Filter = Union[str, Sequence[str], None]


def _stream(data: Any) -> Any:
    """``data`` as an object with ``__arrow_c_stream__``: pandas DataFrames without it (and
    with a non-trivial index) go through ``pyarrow.Table.from_pandas`` without the index;
    pyarrow RecordBatches become tables."""
    module = type(data).__module__ or ""
    if module.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__"):
        return data
    raise TypeError(
        f"expected Arrow data (pyarrow Table or RecordBatchReader, polars or pandas DataFrame), "
        f"got {type(data).__name__}"
    )


class Table:
    """A Hudi table at a location: a local path, or ``s3://``, ``az://``, ``gs://`` with
    ``storage_options`` (``{"s3.endpoint": ..., "s3.access-key-id": ...}``)."""

    def __init__(self, path: str, storage_options: Optional[Dict[str, str]] = None) -> None:
        self._t = _NativeTable(str(path), storage_options)
        self._storage_options = dict(storage_options) if storage_options else None

    @classmethod
    def _wrap(cls, native: Any, storage_options: Optional[Dict[str, str]] = None) -> "Table":
        t = cls.__new__(cls)
        t._t = native
        t._storage_options = dict(storage_options) if storage_options else None
        return t

    def __reduce__(self) -> Any:
        # Pickled by location and storage options (for Ray and multiprocessing workers).
        return (Table, (self.path, self._storage_options))

    @classmethod
    def create(
        cls,
        path: str,
        data: Any,
        key: Union[str, Sequence[str]],
        partition_by: Union[str, Sequence[str], None] = None,
        ordering: Optional[str] = None,
        table_type: str = "cow",
        name: Optional[str] = None,
        table_version: int = 9,
        storage_options: Optional[Dict[str, str]] = None,
        base_format: str = "parquet",
    ) -> "Table":
        """Creates a table whose schema is ``data``'s and writes ``data``'s rows as its first
        commit (an empty ``data`` creates an empty table). ``base_format="lance"`` keeps its
        base files in Lance (Hudi 1.2's ``hoodie.table.base.file.format=LANCE``; table
        version 9)."""
        keys = [key] if isinstance(key, str) else list(key)
        parts = [partition_by] if isinstance(partition_by, str) else partition_by
        parts = list(parts) if parts is not None else None
        native = _NativeTable.create(
            str(path), _stream(data), keys, parts, ordering, table_type, name, table_version,
            storage_options, base_format,
        )
        return cls._wrap(native, storage_options)

    @property
    def path(self) -> str:
        """The table's location."""
        return self._t.path

    def __repr__(self) -> str:
        return f"arbor.Table({self.path!r})"

    def schema(self, branch: Optional[str] = None) -> pa.Schema:
        """The read schema: the ``_hoodie_*`` meta columns, then the data columns."""
        return self._t.schema(branch)

    def read(
        self,
        columns: Optional[Sequence[str]] = None,
        filter: Filter = None,
        branch: Optional[str] = None,
        tag: Optional[str] = None,
        as_of: Optional[str] = None,
        incremental: Optional[Tuple[Optional[str], Optional[str]]] = None,
        read_optimized: bool = False,
    ) -> pa.Table:
        """Reads main (or ``branch``), at ``tag``, ``as_of`` an instant or ISO time, or the
        ``incremental=(start, end)`` range of completion times. ``filter`` is one predicate or a
        list (all must hold), as ``arbor read --where`` takes them: ``"city = sf"``,
        ``"fare >= 20"``, ``"city IN sf,nyc"``, ``"rider IS NULL"``."""
        return self._t.read(
            list(columns) if columns is not None else None, filter, branch, tag, as_of,
            incremental, read_optimized,
        )

    def read_batches(
        self,
        columns: Optional[Sequence[str]] = None,
        filter: Filter = None,
        branch: Optional[str] = None,
        tag: Optional[str] = None,
        as_of: Optional[str] = None,
        incremental: Optional[Tuple[Optional[str], Optional[str]]] = None,
        read_optimized: bool = False,
    ) -> pa.RecordBatchReader:
        """``read`` as a stream: batches are read as they are asked for."""
        return self._t.read_batches(
            list(columns) if columns is not None else None, filter, branch, tag, as_of,
            incremental, read_optimized,
        )

    def write(self, data: Any, op: str = "upsert", branch: Optional[str] = None) -> Dict[str, Any]:
        """Writes ``data`` as one commit: ``op`` is upsert, insert, bulk_insert, delete,
        insert_overwrite or insert_overwrite_table. Returns the commit (instant, counts)."""
        return self._t.write(_stream(data), op, branch)

    def branch(self, name: str, from_tag: Optional[str] = None) -> None:
        """Creates working branch ``name`` from main's head (or main's tag ``from_tag``)."""
        self._t.branch(name, from_tag)

    def branches(self) -> List[Dict[str, Any]]:
        """The working branches."""
        return self._t.branches()

    def drop_branch(self, name: str) -> None:
        """Drops working branch ``name``."""
        self._t.drop_branch(name)

    def publish(self, branch: str, drop: bool = False) -> Dict[str, Any]:
        """Fast-forwards main to ``branch`` (other engines follow); ``drop`` drops it after."""
        return self._t.publish(branch, drop)

    def tag(self, name: str, branch: Optional[str] = None, instant: Optional[str] = None) -> Dict[str, Any]:
        """Tags the latest write (or ``instant``) of main (or ``branch``); the tag's files are
        kept by every clean."""
        return self._t.tag(name, branch, instant)

    def tags(self, branch: Optional[str] = None) -> List[Dict[str, Any]]:
        """The unexpired tags of main (or ``branch``)."""
        return self._t.tags(branch)

    def drop_tag(self, name: str, branch: Optional[str] = None) -> None:
        """Drops tag ``name`` and its savepoints."""
        self._t.drop_tag(name, branch)

    def clean(
        self,
        retain: Optional[int] = None,
        policy: str = "commits",
        dry_run: bool = False,
        branch: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Deletes files no snapshot within the retention (``policy`` commits, versions or
        hours, ``retain`` of them) needs; never one a branch, tag, savepoint or clone needs."""
        return self._t.clean(retain, policy, dry_run, branch)

    def set_ttl(
        self,
        policy: str,
        retain: str,
        spec: Optional[str] = None,
        fields: Optional[Sequence[str]] = None,
        time_field: Optional[str] = None,
        format: Optional[str] = None,
        branch: Optional[str] = None,
    ) -> None:
        """Sets a partition-TTL policy: ``policy`` time, creation-time, event-time, count or
        size, ``retain`` ``30d``, ``12h``, ``10``, ``100GiB``."""
        self._t.set_ttl(policy, retain, spec, list(fields) if fields else None, time_field, format, branch)

    def run_ttl(
        self, dry_run: bool = False, max_partitions: Optional[int] = None, branch: Optional[str] = None
    ) -> Dict[str, Any]:
        """Deletes the partitions the TTL policies expire (one commit); returns them."""
        return self._t.run_ttl(dry_run, max_partitions, branch)

    def clone(
        self,
        target: str,
        tag: Optional[str] = None,
        instant: Optional[str] = None,
        branch: Optional[str] = None,
        deep: bool = False,
        storage_options: Optional[Dict[str, str]] = None,
    ) -> "Table":
        """Clones the table to ``target`` without copying data (``deep`` copies it)."""
        return Table._wrap(
            self._t.clone(str(target), tag, instant, branch, deep, storage_options), storage_options
        )

    def begin_write(self, op: str = "upsert", branch: Optional[str] = None) -> "WriteTransaction":
        """Begins a write split across processes or machines: send the returned transaction
        (picklable) to workers, each of which calls ``write_fragment(data)`` and returns the
        ``Fragment`` (picklable); then ``commit(fragments)`` here, once. Nothing is visible
        before the commit; ``abort()`` (or leaving a ``with`` block by an exception) rolls the
        write back. The rows of one file group must go to one fragment, and for upserts and
        deletes each key to one fragment: the commit refuses fragments that break this."""
        return WriteTransaction(self, op, branch, _begin_write(self._t, op, branch))


    def route(self, data: Any, op: str = "upsert", branch: Optional[str] = None) -> pa.Array:
        """The route (``int64``, non-negative) of each row of ``data`` for a distributed ``op``: rows whose
        key is stored in one file group share one, as do rows of one new key. Shuffle rows by
        route before ``write_fragment`` (Ray: ``repartition(keys=[...])``) so that every file
        group and key goes to one fragment. Routes computed in different processes agree."""
        return _route(self._t, op, _stream(data), branch)


class Fragment:
    """What one fragment of a distributed write wrote (its files, index changes and counts).
    Picklable: it travels as its bytes."""

    __slots__ = ("_data", "_info")

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._info: Optional[Dict[str, Any]] = None

    def __reduce__(self) -> Any:
        return (Fragment, (self._data,))

    def to_bytes(self) -> bytes:
        """The fragment's encoding (what ``Fragment(data)`` reads)."""
        return self._data

    @property
    def info(self) -> Dict[str, Any]:
        """instant, task, inserted, updated, deleted and files (storage keys)."""
        if self._info is None:
            self._info = _fragment_info(self._data)
        return self._info

    def __repr__(self) -> str:
        i = self.info
        return (
            f"arbor.Fragment(instant={i['instant']!r}, task={i['task']}, "
            f"inserted={i['inserted']}, updated={i['updated']}, deleted={i['deleted']}, "
            f"files={len(i['files'])})"
        )


class WriteTransaction:
    """A distributed write (``Table.begin_write``). The object that began it is the
    coordinator (``commit``, ``abort``); a pickled copy is a worker's (``write_fragment``)."""

    def __init__(self, table: Table, op: str, branch: Optional[str], native: Any) -> None:
        self._table = table
        self._op = op
        self._branch = branch
        self._native = native
        self._context: str = native.context if native is not None else ""

    def __getstate__(self) -> Dict[str, Any]:
        return {
            "table": self._table, "op": self._op, "branch": self._branch,
            "context": self._context,
        }

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._table = state["table"]
        self._op = state["op"]
        self._branch = state["branch"]
        self._context = state["context"]
        self._native = None

    @property
    def context(self) -> str:
        """The serializable context (JSON) fragment writers need."""
        return self._context

    def write_fragment(self, data: Any, task: Optional[int] = None) -> Fragment:
        """Writes ``data``'s rows as one fragment, as task ``task`` (a number unique among the
        write's fragments, such as a Ray task's index; random when not given)."""
        if task is None:
            task = random.getrandbits(53)
        return Fragment(
            _write_fragment(self._table._t, self._context, _stream(data), int(task), self._branch)
        )

    def _coordinator(self) -> Any:
        if self._native is None:
            raise ArborError(
                f"{self._table.path}: commit and abort run on the transaction begin_write "
                f"returned (the coordinator), not on a pickled copy"
            )
        return self._native

    def commit(self, fragments: Sequence[Fragment]) -> Dict[str, Any]:
        """Commits the fragments as one commit; returns it (instant, counts)."""
        data = [f.to_bytes() if isinstance(f, Fragment) else bytes(f) for f in fragments]
        return self._coordinator().commit(data)

    def abort(self) -> None:
        """Gives the write up: nothing of it stays."""
        self._coordinator().abort()

    def __enter__(self) -> "WriteTransaction":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is not None and self._native is not None:
            try:
                self._native.abort()
            except ArborError:
                pass
