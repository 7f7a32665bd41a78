"""The Ray executor of ``cirrus ingest`` (``--executor ray``, extra ``cirrus[ray]``).

A Ray Data pipeline: one row per raw file, ``flat_map`` reads each file into
records (Ray tasks, in parallel across files), ``map_batches`` settles them on
a pool of actors that each hold one Presidio/spaCy engine, and the driver
streams the outcomes back in input order.  The driver writes the workspace
with the same code as the local executor, so the two give identical files.

The corpus pass (docs/canned-lines.md) runs on the driver before the
pipeline starts, reading the raw input in order as the local executor does;
its :class:`cirrus.ingest.canned.CannedLines` travel to every actor inside
the :class:`ProcessorFactory`, so the actors cut exactly the lines the local
pool cuts.

Rows cross process boundaries as pickled bytes: tickets are nested Python
objects that an Arrow schema would only flatten and rebuild.  On a cluster
(``--ray-address``) every node needs Cirrus and its pipeline's models
installed; the raw input must be readable at the same path on every node.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cirrus.ingest.pipeline import LazyProcessor, Outcome, ProcessorFactory, settle
from cirrus.ingest.readers import read_record
from cirrus.ingest.readers.files import UnreadablePath, iter_files, read_file_records
from cirrus.llm.providers import EndpointError, ModelAuthError

# Readers wait on disk; leave most of each CPU to the engines.
_READ_CPUS = 0.25
_SETTLE_CPUS = 0.75
_BATCH = 8


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached."""


def _import_ray() -> Any:
    # Ray reports usage statistics over the network unless told not to; Cirrus
    # runs offline (a cluster started with `ray start` keeps its own setting)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is a separate extra of ray)
    except ImportError as exc:
        raise RayUnavailable(
            "the Ray executor needs Ray Data: pip install 'cirrus[ray]' (or use --executor local)"
        ) from exc
    return ray


def _read_file(row: dict[str, Any], fmt: str) -> Iterator[dict[str, bytes]]:
    """``flat_map`` step: one raw file row -> one row per record in it."""
    if row["problem"] is not None:  # an unreadable path: one error record
        records: Iterable[Any] = [UnreadablePath(row["source"], row["problem"]).record()]
    else:
        records = read_file_records(Path(row["path"]), row["source"])
    for record in records:
        yield {"item": pickle.dumps(read_record(record, fmt), protocol=pickle.HIGHEST_PROTOCOL)}


class _SettleBatch:
    """``map_batches`` actor: one engine per actor, reused for every batch."""

    def __init__(self, factory: ProcessorFactory, statuses: frozenset[str]) -> None:
        self.processor = LazyProcessor(factory)
        self.statuses = statuses

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        outcomes: list[Outcome | EndpointError] = []
        for blob in batch["item"]:
            try:
                outcomes.append(settle(self.processor, pickle.loads(blob), self.statuses))
            except EndpointError as exc:
                # handed to the driver as a value, which raises it: an error
                # raised here would come back wrapped in Ray's own types
                outcomes.append(exc)
                break
        return {"outcome": [pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL) for o in outcomes]}


def ray_outcomes(raw_path: Path, fmt: str, factory: ProcessorFactory, statuses: Iterable[str],
                 jobs: int = 0, address: str | None = None) -> Iterator[Outcome]:
    """Settle every record under ``raw_path`` on Ray, in input order.

    Uses the Ray instance already initialised in this process if there is
    one, else connects to ``address`` (``auto`` or ``ray://…``), else starts a
    local instance with ``jobs`` CPUs.  ``jobs`` (0: every CPU of the
    cluster) is the number of engine actors.  Duplicate ticket ids are not
    detected here (files are read in parallel); the caller applies
    :func:`cirrus.ingest.pipeline.mark_duplicates`."""
    ray = _import_ray()
    files = [{"path": None, "source": item.source, "problem": item.reason} if isinstance(item, UnreadablePath)
             else {"path": str(item[0].resolve()), "source": item[1], "problem": None}
             for item in iter_files(Path(raw_path))]
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, num_cpus=(jobs or None) if address is None else None,
                     include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        except ConnectionError as exc:
            raise RayUnavailable(f"cannot connect to the Ray cluster at {address}: {exc}") from exc
    try:
        if not files:
            return
        actors = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True  # the workspace is written in input order
        context.enable_progress_bars = False  # the driver shows its own bar
        context.enable_operator_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        dataset = (
            ray.data.from_items(files, override_num_blocks=len(files))
            .flat_map(_read_file, fn_kwargs={"fmt": fmt}, num_cpus=_READ_CPUS)
            .map_batches(_SettleBatch, fn_constructor_kwargs={"factory": factory, "statuses": frozenset(statuses)},
                         batch_size=_BATCH, batch_format="numpy", num_cpus=_SETTLE_CPUS, concurrency=actors)
        )
        for row in dataset.iter_rows():
            outcome = pickle.loads(row["outcome"])
            if isinstance(outcome, ModelAuthError):
                raise outcome
            if isinstance(outcome, EndpointError):  # a key this shell has but the workers lack
                raise EndpointError(f"{outcome} in the environment of the Ray workers (a Ray that cirrus "
                                    "starts inherits this shell's; a cluster's workers need it set there)")
            yield outcome
    finally:
        if started_here:
            ray.shutdown()
