"""arbor on Ray Data: read any branch, tag or instant of a Hudi table in parallel read tasks, and
write a ``Dataset`` as one commit from many tasks.

    import ray, arbor.ray
    ds = arbor.ray.read_arbor("s3://lake/trips", branch="audit", columns=["uuid", "fare"],
                              filter="city = sf", storage_options={...})
    ds.write_datasink(arbor.ray.ArborDatasink("s3://lake/trips", op="bulk_insert"))

Reads: the driver plans the read once (partition pruning, data skipping, the file groups
selected), pinned to one instant so that every task reads the same state, then each read task
reads a group of file groups (their latest slices, merged) with the columns and filters pushed
down. Writes: the driver begins the write (``Table.begin_write``); each write task writes its
blocks as one fragment (base and log files under the write's instant) and returns its
description; the driver commits every fragment at once when all tasks succeeded, and rolls the
write back when one failed: readers see all of it or nothing.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import uuid

import pyarrow as pa

import arbor
from arbor._native import plan_read as _plan_read
from arbor._native import read_file_groups as _read_file_groups

try:
    import ray.data
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError as e:  # pragma: no cover - exercised without ray installed
    raise ImportError("arbor.ray needs Ray Data: pip install 'ray[data]'") from e

__all__ = ["read_arbor", "write_arbor", "ArborDatasource", "ArborDatasink"]

#: The column ``write_arbor`` routes rows by (dropped before writing).
ROUTE_COLUMN = "__arbor_route"

Filter = Union[str, Sequence[str], None]

#: The commits of the ArborDatasinks that completed in this (driver) process, by sink id.
_RESULTS: Dict[str, Dict[str, Any]] = {}


def _balanced(groups: List[Tuple[str, str, int]], bins: int) -> List[List[Tuple[str, str, int]]]:
    """``groups`` in at most ``bins`` lists of about equal bytes (largest first, each into the
    lightest list)."""
    bins = max(1, min(bins, len(groups)))
    out: List[List[Tuple[str, str, int]]] = [[] for _ in range(bins)]
    sizes = [0] * bins
    for g in sorted(groups, key=lambda g: -g[2]):
        i = sizes.index(min(sizes))
        out[i].append(g)
        sizes[i] += g[2]
    return [b for b in out if b]


class ArborDatasource(Datasource):
    """A Ray Data source reading one state of an arbor (Hudi) table: main or ``branch``, at
    ``tag`` or ``as_of`` (latest otherwise), ``columns`` and ``filter`` (``arbor read
    --where`` predicates) pushed down. Planned on construction, on the driver."""

    def __init__(
        self,
        path: str,
        branch: Optional[str] = None,
        tag: Optional[str] = None,
        as_of: Optional[str] = None,
        columns: Optional[Sequence[str]] = None,
        filter: Filter = None,
        storage_options: Optional[Dict[str, str]] = None,
    ) -> None:
        self._table = arbor.Table(path, storage_options)
        self._columns = list(columns) if columns is not None else None
        self._filter = [filter] if isinstance(filter, str) else (list(filter) if filter else None)
        self._branch = branch
        self._tag = tag
        planned = _plan_read(self._table._t, self._columns, self._filter, branch, tag, as_of)
        # A tag names its own instant; otherwise every task reads as of the planned one.
        self._as_of = None if tag is not None else planned["as_of"]
        self._schema: pa.Schema = planned["schema"]
        self._groups: List[Tuple[str, str, int]] = list(planned["groups"])

    def get_name(self) -> str:
        return "Arbor"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return sum(g[2] for g in self._groups) or None

    def _read(self, groups: List[Tuple[str, str]]) -> Iterable[pa.Table]:
        yield _read_file_groups(
            self._table._t, groups, self._columns, self._filter, self._branch, self._tag,
            self._as_of,
        )

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        schema = self._schema
        if not self._groups:
            return [ReadTask(lambda: [schema.empty_table()],
                             BlockMetadata(num_rows=0, size_bytes=0, exec_stats=None,
                                           input_files=None), schema=schema)]
        tasks = []
        for part in _balanced(self._groups, parallelism):
            groups = [(p, f) for p, f, _ in part]
            meta = BlockMetadata(num_rows=None, size_bytes=sum(g[2] for g in part),
                                 exec_stats=None, input_files=None)
            tasks.append(ReadTask(lambda groups=groups: self._read(groups), meta, schema=schema))
        return tasks


def read_arbor(
    path: str,
    *,
    branch: Optional[str] = None,
    tag: Optional[str] = None,
    as_of: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    filter: Filter = None,
    storage_options: Optional[Dict[str, str]] = None,
    override_num_blocks: Optional[int] = None,
    **ray_remote_args: Any,
) -> "ray.data.Dataset":
    """Reads main (or ``branch``) of the table at ``path``, at ``tag`` or ``as_of`` (an
    instant or an ISO time), as a Ray ``Dataset``: the rows ``arbor read`` (and
    ``arbor.Table.read``) returns for the same arguments, read in parallel tasks, one per
    group of file groups."""
    source = ArborDatasource(path, branch, tag, as_of, columns, filter, storage_options)
    return ray.data.read_datasource(
        source, override_num_blocks=override_num_blocks, ray_remote_args=ray_remote_args or None
    )


class ArborDatasink(Datasink):
    """A Ray Data sink writing a ``Dataset`` into the table at ``path`` (main or ``branch``) as
    one commit of ``op`` (upsert, insert, bulk_insert, delete, insert_overwrite,
    insert_overwrite_table, as ``Table.write`` spells it): each write task writes its blocks
    as one fragment, the driver commits all fragments once every task succeeded and rolls the
    write back when one failed. For upserts and deletes, the rows of one key (and, on
    copy-on-write tables, of one file group) must reach one task: the commit refuses the write
    otherwise, committing nothing (``write_arbor`` routes them). ``result`` holds the commit
    afterwards."""

    def __init__(
        self,
        path: str,
        op: str = "upsert",
        branch: Optional[str] = None,
        storage_options: Optional[Dict[str, str]] = None,
    ) -> None:
        self._path = path
        self._op = op
        self._branch = branch
        self._storage_options = storage_options
        # Begun on the driver; tasks receive a pickled copy (the context, not the coordinator).
        self._transaction: Optional[arbor.WriteTransaction] = None
        # Ray calls the driver-side hooks on a copy of this object: the commit is kept by id.
        self._id = uuid.uuid4().hex

    @property
    def result(self) -> Optional[Dict[str, Any]]:
        """The commit (instant, counts) once the write completed, else ``None``."""
        return _RESULTS.get(self._id)

    def get_name(self) -> str:
        return "Arbor"

    @property
    def supports_distributed_writes(self) -> bool:
        return True

    @property
    def min_bytes_per_write(self) -> Optional[int]:
        # Not None keeps the write operator out of operator fusion: Ray then calls
        # on_write_start (which begins the write) before it ships this sink to the write
        # tasks. A fused write operator would never call it.
        return 1

    def _not_started(self) -> "arbor.ArborError":
        return arbor.ArborError(
            f"{self._path}: Ray did not call ArborDatasink.on_write_start before writing, so "
            f"the write has no instant: nothing is written"
        )

    def on_write_start(self, schema: Optional[pa.Schema] = None) -> None:
        table = arbor.Table(self._path, self._storage_options)
        self._transaction = table.begin_write(self._op, self._branch)

    def write(self, blocks: Iterable[Any], ctx: Any) -> Optional[bytes]:
        tables = []
        for block in blocks:
            if not isinstance(block, pa.Table):
                block = pa.Table.from_pandas(block, preserve_index=False)
            if block.num_rows:
                tables.append(block)
        if self._transaction is None:
            raise self._not_started()
        if not tables:
            return None
        data = pa.concat_tables(tables, promote_options="default")
        fragment = self._transaction.write_fragment(data, task=getattr(ctx, "task_idx", None))
        return fragment.to_bytes()

    def on_write_complete(self, write_result: Any) -> None:
        if self._transaction is None:
            if not getattr(write_result, "num_rows", 0):
                raise arbor.ArborError(f"{self._path}: the dataset has no rows: nothing was written")
            raise self._not_started()
        returns = write_result.write_returns if hasattr(write_result, "write_returns") else write_result
        fragments = [arbor.Fragment(r) for r in returns if r]
        if not fragments:
            self._transaction.abort()
            raise arbor.ArborError(f"{self._path}: the dataset has no rows: nothing was written")
        _RESULTS[self._id] = self._transaction.commit(fragments)

    def on_write_failed(self, error: Exception) -> None:
        if self._transaction is not None:
            try:
                self._transaction.abort()
            except arbor.ArborError:
                pass


class _Router:
    """Adds each row's route (``Table.route``) as ``ROUTE_COLUMN``; the table is opened once per
    worker."""

    def __init__(self, path: str, op: str, branch: Optional[str],
                 storage_options: Optional[Dict[str, str]]) -> None:
        self._args = (path, op, branch, storage_options)
        self._table: Optional[arbor.Table] = None

    def __call__(self, batch: pa.Table) -> pa.Table:
        path, op, branch, storage_options = self._args
        if self._table is None:
            self._table = arbor.Table(path, storage_options)
        if batch.num_rows == 0:
            return batch.append_column(ROUTE_COLUMN, pa.array([], pa.int64()))
        return batch.append_column(ROUTE_COLUMN, self._table.route(batch, op, branch))


def write_arbor(
    ds: "ray.data.Dataset",
    path: str,
    *,
    op: str = "upsert",
    branch: Optional[str] = None,
    storage_options: Optional[Dict[str, str]] = None,
    num_tasks: Optional[int] = None,
) -> Dict[str, Any]:
    """Writes ``ds`` into the table at ``path`` (main or ``branch``) as one commit of ``op`` in
    ``num_tasks`` write tasks (default: the cluster's CPUs). Upserts and deletes are routed
    first: each row gets its route from the table's index (in parallel map tasks), rows are
    shuffled by route so that every file group and key reaches one task, then written through
    ``ArborDatasink``. Returns the commit (instant, counts)."""
    tasks = num_tasks or max(1, int(ray.cluster_resources().get("CPU", 1)))
    kind = op.strip().lower().replace("-", "_")
    if kind in ("upsert", "delete"):
        ds = (
            ds.map_batches(_Router(path, kind, branch, storage_options), batch_format="pyarrow")
            .repartition(tasks, keys=[ROUTE_COLUMN])
            .drop_columns([ROUTE_COLUMN])
        )
    else:
        ds = ds.repartition(tasks)
    sink = ArborDatasink(path, op=op, branch=branch, storage_options=storage_options)
    ds.write_datasink(sink)
    return sink.result or {}
