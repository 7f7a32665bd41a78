"""The ingest stage chain and its executor.

``TicketProcessor`` is the pure part: one raw :class:`Ticket` in, one
:class:`Processed` (task + cassette + statistics) or :class:`Skipped` out,
through denoise, de-identify, canonicalize, knowledge, cassettes, annotate.
It never touches files.  ``run_ingest`` is the I/O around it: it streams
tickets from the readers, fans them out to worker processes (each with its
own Presidio/spaCy engine), keeps their order, and writes the workspace.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cirrus.config import PipelineConfig
from cirrus.ingest.annotate.base import Annotator
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.ingest.canonical import canonicalize
from cirrus.ingest.cassettes import build_cassette, normalize_arguments
from cirrus.ingest.deid.deidentify import Deidentifier
from cirrus.ingest.denoise import Denoiser
from cirrus.ingest.knowledge import KnowledgeBase, select_knowledge
from cirrus.ingest.tasks import Dialogue, build_task
from cirrus.ingest.tool_schemas import infer_tool_schemas, merge_schemas
from cirrus.llm.providers import Endpoint
from cirrus.schema import KnowledgeDoc, Quarantined, SourceRef, Ticket

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def cassette_filename(task_id: str) -> str:
    """A file name for a task's cassette that cannot leave ``tool_mocks/``;
    ids that had to be changed get a hash suffix so two never collide."""
    safe = _UNSAFE_FILE_CHARS.sub("_", task_id).lstrip(".") or "_"
    if safe != task_id:
        safe = f"{safe[:80]}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"
    return f"{safe}.yaml"


@dataclass(frozen=True, slots=True)
class AnnotatorSpec:
    """How workers build their annotator (an LLM client can't be pickled)."""

    endpoint: Endpoint | None = None

    @property
    def label(self) -> str:
        return f"llm:{self.endpoint.model}@{self.endpoint.base_url}" if self.endpoint else "rules"


@dataclass(slots=True)
class Processed:
    task: dict[str, Any]
    cassette: dict[str, Any] | None
    pii: Counter[str]
    knowledge_source: str
    llm_fallback: bool = False


@dataclass(slots=True)
class Skipped:
    origin: SourceRef
    ticket_id: str
    reason: str


class TicketProcessor:
    """All stages for one ticket; one instance per worker process."""

    def __init__(self, config: PipelineConfig, kb_docs: list[KnowledgeDoc] | None = None,
                 tool_schemas: dict[str, dict[str, Any]] | None = None,
                 annotator: AnnotatorSpec = AnnotatorSpec()) -> None:
        self.config = config
        self.deid = Deidentifier(config.deid)
        self.denoise = Denoiser.from_config(config.denoise)
        self.kb = KnowledgeBase(kb_docs) if kb_docs else None
        self.tool_schemas = tool_schemas or {}
        rules = RuleAnnotator.from_config(config.annotate)
        self.annotator: Annotator = rules
        if annotator.endpoint is not None:
            from cirrus.ingest.annotate.llm import LLMAnnotator

            self.annotator = LLMAnnotator(annotator.endpoint, fallback=rules)

    def __call__(self, ticket: Ticket) -> Processed | Skipped:
        clean, pii = self.deid.deidentify(self.denoise(ticket))
        dialogue = Dialogue.split(canonicalize(clean))
        if not dialogue.pairs:
            return Skipped(ticket.origin, ticket.ticket_id, "no agent reply to a customer message after denoising")
        exchanges = dialogue.exchanges()
        for exchange in exchanges:
            exchange.arguments = normalize_arguments(exchange.arguments)
        cassette = build_cassette(exchanges)
        fallbacks_before = getattr(self.annotator, "fallbacks", 0)
        knowledge = select_knowledge(clean.knowledge, dialogue.customer_text(), self.kb, self.config.knowledge.max_docs)
        task = build_task(
            task_id=ticket.ticket_id,
            category=ticket.category,
            channel=ticket.channel,
            language=ticket.language,
            dialogue=dialogue,
            knowledge=knowledge,
            tools=merge_schemas(infer_tool_schemas(exchanges), self.tool_schemas),
            cassette=f"tool_mocks/{cassette_filename(ticket.ticket_id)}" if cassette else None,
            annotator=self.annotator,
        )
        source = "ticket" if clean.knowledge else ("kb" if knowledge else "none")
        return Processed(task.model_dump(mode="json"), cassette, pii, source,
                         getattr(self.annotator, "fallbacks", 0) > fallbacks_before)


# --- executors ---------------------------------------------------------------

_WORKER: TicketProcessor | None = None


def _init_worker(factory: Callable[[], TicketProcessor]) -> None:
    global _WORKER
    _WORKER = factory()


def _process_chunk(tickets: list[Ticket]) -> list[Processed | Skipped | Quarantined]:
    assert _WORKER is not None
    return [_safe(_WORKER, t) for t in tickets]


def _safe(processor: TicketProcessor, ticket: Ticket) -> Processed | Skipped | Quarantined:
    try:
        return processor(ticket)
    except Exception as exc:  # one bad ticket must not stop the run, nor leak its text
        return Quarantined(ticket.origin, f"processing failed ({type(exc).__name__})", ticket.ticket_id)


@dataclass
class ProcessorFactory:
    """Picklable recipe for a :class:`TicketProcessor`."""

    config: PipelineConfig
    kb_docs: list[KnowledgeDoc] | None = None
    tool_schemas: dict[str, dict[str, Any]] | None = None
    annotator: AnnotatorSpec = field(default_factory=AnnotatorSpec)

    def __call__(self) -> TicketProcessor:
        return TicketProcessor(self.config, self.kb_docs, self.tool_schemas, self.annotator)


def _chunks(items: Iterable[Ticket], size: int) -> Iterator[list[Ticket]]:
    chunk: list[Ticket] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def process_tickets(tickets: Iterable[Ticket], factory: ProcessorFactory, jobs: int,
                    chunk_size: int = 8) -> Iterator[tuple[Ticket, Processed | Skipped | Quarantined]]:
    """Run the stages over ``tickets`` on ``jobs`` processes, yielding results
    in input order.  At most ``2 * jobs`` chunks are in flight, so memory stays
    bounded whatever the input size (``Pool.imap`` would read ahead without
    limit)."""
    if jobs <= 1:
        processor = factory()
        for ticket in tickets:
            yield ticket, _safe(processor, ticket)
        return
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with context.Pool(jobs, initializer=_init_worker, initargs=(factory,)) as pool:
        pending: deque[tuple[list[Ticket], Any]] = deque()
        for chunk in _chunks(tickets, chunk_size):
            pending.append((chunk, pool.apply_async(_process_chunk, (chunk,))))
            while len(pending) >= 2 * jobs:
                done_chunk, result = pending.popleft()
                yield from zip(done_chunk, result.get())
        while pending:
            done_chunk, result = pending.popleft()
            yield from zip(done_chunk, result.get())
