"""The ingest stage chain and its executor.

``TicketProcessor`` is the pure part: one raw :class:`Ticket` in, one
:class:`Processed` (task + cassette + statistics) or :class:`Skipped` out,
through denoise, de-identify, canonicalize, knowledge, cassettes, annotate.
It never touches files.  ``run_ingest`` is the I/O around it: it streams
tickets from the readers, fans them out to worker processes (each with its
own Presidio/spaCy engine), keeps their order, and writes the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import re
import signal
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cirrus.config import PipelineConfig
from cirrus.ingest.annotate.base import Annotator
from cirrus.ingest.annotate.requests import collecting_requests
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.ingest.annotate.select import AllSelector, CheckpointMode, CheckpointSelector, RuleSelector
from cirrus.ingest.canned import CannedLines
from cirrus.ingest.canonical import canonicalize
from cirrus.ingest.context import context_lines, mark_context
from cirrus.ingest.cassettes import build_cassette, normalize_arguments
from cirrus.ingest.deid.deidentify import Deidentifiers
from cirrus.ingest.deid.ids import status_label
from cirrus.ingest.denoise import Denoiser
from cirrus.ingest.language import ticket_language
from cirrus.ingest.knowledge import KnowledgeBase, select_knowledge
from cirrus.ingest.tasks import Dialogue, build_task
from cirrus.ingest.tool_schemas import infer_tool_schemas, merge_schemas
from cirrus.llm.providers import Endpoint, EndpointError, shown_url
from cirrus.schema import KnowledgeDoc, Quarantined, SourceRef, Ticket
from cirrus.usage import UsageLedger, recording

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def cassette_filename(task_id: str) -> str:
    """A file name for a task's cassette that cannot leave ``tool_mocks/``
    and fits any file system (255 bytes); ids that had to be changed or cut
    get a hash suffix so two never collide."""
    safe = _UNSAFE_FILE_CHARS.sub("_", task_id).lstrip(".") or "_"
    if safe != task_id or len(safe.encode()) > 120:
        safe = f"{safe[:80]}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"
    return f"{safe}.yaml"


@dataclass(frozen=True, slots=True)
class AnnotatorSpec:
    """How workers build their annotator (an LLM client can't be pickled)
    and, with ``checkpoints="select"``, their checkpoint selector (the same
    model, or the rules)."""

    endpoint: Endpoint | None = None
    checkpoints: CheckpointMode = "all"
    # ingest --batch (docs/batch.md): the first pass collects the model's requests (``collect``), the second
    # reads the Batch API's answers (``answers_path``, a JSONL of custom_id + response) instead of calling
    collect: bool = False
    answers_path: Path | None = None

    @property
    def label(self) -> str:
        return f"llm:{self.endpoint.model}@{shown_url(self.endpoint.base_url)}" if self.endpoint else "rules"

    @property
    def selector_label(self) -> str:
        """``all``, ``rules`` or ``llm:<model>`` (the manifest's ``selector``)."""
        if self.checkpoints == "all":
            return "all"
        return f"llm:{self.endpoint.model}" if self.endpoint else "rules"


@dataclass(slots=True)
class Processed:
    task: dict[str, Any]
    cassette: dict[str, Any] | None
    pii: Counter[str]
    knowledge_source: str
    llm_fallback: bool = False
    candidates: int = 0  # agent turns that could have been checkpoints
    usage: dict[str, Any] | None = None  # the annotator's model calls for this ticket (cirrus.usage)
    requests: list[tuple[str, dict[str, Any]]] | None = None  # collected for a batch (AnnotatorSpec.collect)


@dataclass(slots=True)
class Skipped:
    origin: SourceRef
    ticket_id: str
    reason: str


def ticket_chars(ticket: Ticket) -> int:
    """Characters of text in ``ticket``: messages, OCR, tool names,
    arguments and results (every string, key and number in them), knowledge
    documents and the ticket's ids; what de-identification reads."""
    total = sum(len(value or "") for value in (ticket.ticket_id, ticket.category, ticket.channel, ticket.status))
    stack: list[Any] = []
    for event in ticket.events:
        total += len(event.text) + sum(len(text) for text in event.ocr) + len(event.name or "")
        stack += [event.arguments, event.content]
    for doc in ticket.knowledge:
        total += len(doc.doc_id) + len(doc.title) + len(doc.text)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            total += sum(len(str(key)) for key in value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif value is not None and not isinstance(value, bool):
            total += len(value) if isinstance(value, str) else len(str(value))
    return total


def oversize(ticket: Ticket, limit: int) -> Quarantined | None:
    """The quarantine entry of a ticket with more than ``limit`` characters
    of text (:func:`ticket_chars`), else ``None``: such a ticket would take
    minutes to hours to de-identify, and none of its text is written."""
    chars = ticket_chars(ticket)
    if chars <= limit:
        return None
    return Quarantined(ticket.origin, f"ticket too large: {chars:,} characters of text, over the limit of "
                                      f"{limit:,} (raise it with cirrus ingest --max-ticket-chars N, or [limits] "
                                      "max_ticket_chars in the pipeline file)", ticket.ticket_id)


class TicketProcessor:
    """All stages for one ticket; one instance per worker process.  A ticket
    over the pipeline's ``[limits] max_ticket_chars`` is quarantined
    (:func:`oversize`) before any stage reads it.  ``canned``: the corpus's
    canned agent lines (the first pass of ingest), cut out while denoising."""

    def __init__(self, config: PipelineConfig, kb_docs: list[KnowledgeDoc] | None = None,
                 tool_schemas: dict[str, dict[str, Any]] | None = None,
                 annotator: AnnotatorSpec = AnnotatorSpec(), canned: CannedLines | None = None,
                 kb_deidentified: bool = False) -> None:
        self.config = config
        self.canned = canned
        self.tool_schemas = tool_schemas or {}
        self._annotator_spec = annotator
        self._denoisers: dict[str, Denoiser] = {}
        self._annotators: dict[str, Annotator] = {}
        self._selectors: dict[str, CheckpointSelector] = {}
        # built first: a bad annotator setting (a missing key) fails before any ticket, and before the
        # seconds the de-identification models take to load
        self.selector_for(config.deid.language)
        self.deids = Deidentifiers(config)
        # Chinese text is segmented with jieba when a language asks for it
        self.segment_han = any(section.tokenizer == "jieba" for section in config.languages.values())
        # the --kb documents go through the same engine as ticket text before any task holds them
        # (``kb_deidentified``: they did already, once for every worker: ProcessorFactory.deidentified_kb)
        docs = kb_docs if kb_deidentified or not kb_docs else self.deids.documents(kb_docs)
        self.kb = KnowledgeBase(docs, self.segment_han) if docs else None

    def denoiser_for(self, language: str) -> Denoiser:
        if language not in self._denoisers:
            cutter = self.canned.cutter(language) if self.canned is not None else None
            self._denoisers[language] = Denoiser.from_config(self.config.denoise_for(language), cut_lines=cutter)
        return self._denoisers[language]

    def annotator_for(self, language: str) -> Annotator:
        """The rules of ``language`` (or the base ones); an LLM annotator when
        one is configured, with those rules as its fallback."""
        if language not in self._annotators:
            rules = RuleAnnotator.from_config(self.config.annotate_for(language))
            annotator: Annotator = rules
            if self._annotator_spec.endpoint is not None:
                from cirrus.ingest.annotate.llm import LLMAnnotator

                annotator = LLMAnnotator(self._annotator_spec.endpoint, fallback=rules,
                                         answers_path=self._annotator_spec.answers_path,
                                         domain=self.config.domain.value())
            self._annotators[language] = annotator
        return self._annotators[language]

    def selector_for(self, language: str) -> CheckpointSelector:
        """What labels and picks the checkpoints of a ``language`` ticket:
        every turn with the annotator's labels (``all``); in ``select`` mode
        the LLM selector when a model is configured (one call labels and
        selects; the rule selector is its fallback), else the rule selector."""
        if language not in self._selectors:
            spec = self._annotator_spec
            selector: CheckpointSelector
            if spec.checkpoints == "all":
                selector = AllSelector(self.annotator_for(language))
            else:
                rules = RuleSelector.from_config(RuleAnnotator.from_config(self.config.annotate_for(language)),
                                                 self.config.select_for(language), self.config.annotate_for(language))
                selector = rules
                if spec.endpoint is not None:
                    from cirrus.ingest.annotate.select_llm import LLMSelector

                    selector = LLMSelector(spec.endpoint, fallback=rules, answers_path=spec.answers_path,
                                           domain=self.config.domain.value())
            self._selectors[language] = selector
        return self._selectors[language]

    def prefetch(self, tickets: Iterable[Ticket]) -> None:
        """De-identification's detection for several tickets at once, ahead
        of processing each (:meth:`Deidentifier.prefetch`: spaCy reads their
        texts in one batch); the tickets are prepared as :meth:`__call__`
        prepares them, so the requests are the same.  Changes no output; a
        ticket that fails here is left to :meth:`__call__`."""
        ready: dict[str, list[Ticket]] = {}
        for ticket in tickets:
            try:
                if oversize(ticket, self.config.limits.max_ticket_chars) is not None:
                    continue
                language = ticket_language(ticket, ticket.language_given)
                ready.setdefault(language, []).append(self.denoiser_for(language)(mark_context(ticket)))
            except Exception:  # noqa: BLE001 -- __call__ meets it again and quarantines the ticket
                continue
        for language, prepared in ready.items():
            try:
                self.deids.for_language(language).prefetch(prepared)
            except Exception:  # noqa: BLE001 -- each ticket's own detection runs anyway
                continue

    def __call__(self, ticket: Ticket) -> Processed | Skipped | Quarantined:
        too_large = oversize(ticket, self.config.limits.max_ticket_chars)
        if too_large is not None:
            return too_large
        language = ticket_language(ticket, ticket.language_given)
        selector = self.selector_for(language)
        marked = mark_context(ticket)
        clean, pii = self.deids.for_language(language).deidentify(self.denoiser_for(language)(marked))
        dialogue = Dialogue.split(canonicalize(clean))
        if not dialogue.pairs:
            return Skipped(ticket.origin, clean.ticket_id, "no agent reply to a customer message after denoising")
        exchanges = dialogue.exchanges()
        for exchange in exchanges:
            exchange.arguments = normalize_arguments(exchange.arguments)
        cassette = build_cassette(exchanges)
        fallbacks_before = getattr(selector, "fallbacks", 0)
        knowledge = select_knowledge(clean.knowledge, dialogue.customer_text(), self.kb, self.config.knowledge.max_docs,
                                     self.segment_han)
        ledger = UsageLedger()  # what the LLM annotator or selector spends on this ticket
        requests: list[tuple[str, dict[str, Any]]] = []
        with recording(ledger), (collecting_requests(requests) if self._annotator_spec.collect
                                 else contextlib.nullcontext()):
            task = build_task(
                task_id=clean.ticket_id,  # its pseudonym when the id holds personal data
                category=clean.category,
                channel=clean.channel,
                language=language,
                dialogue=dialogue,
                knowledge=knowledge,
                context=context_lines(clean),
                tools=merge_schemas(infer_tool_schemas(exchanges), self.tool_schemas),
                cassette=f"tool_mocks/{cassette_filename(clean.ticket_id)}" if cassette else None,
                selector=selector,
            )
        source = "ticket" if clean.knowledge else ("kb" if knowledge else "none")
        return Processed(task.model_dump(mode="json"), cassette, pii, source,
                         getattr(selector, "fallbacks", 0) > fallbacks_before, len(dialogue.pairs),
                         ledger.to_dict() or None, requests or None)


# --- executors ---------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """What became of one item the readers produced, in input order.

    ``status`` is the ticket's status, ``None`` when the item was quarantined
    while reading; ``result`` is ``None`` for a readable ticket whose status
    is not ingested.  Every executor yields exactly one per item read, so the
    workspace does not depend on which executor (or how many workers) ran."""

    origin: SourceRef
    ticket_id: str | None
    status: str | None
    result: Processed | Skipped | Quarantined | None


def settle(processor: Callable[[Ticket], Processed | Skipped | Quarantined], item: Ticket | Quarantined,
           statuses: frozenset[str]) -> Outcome:
    """The outcome of one read item; ``processor`` only sees eligible tickets."""
    if isinstance(item, Quarantined):
        return Outcome(item.origin, item.ticket_id, None, item)
    if item.status not in statuses:  # never de-identified: counted and shown by its status words only
        return Outcome(item.origin, item.ticket_id, status_label(item.status), None)
    return Outcome(item.origin, item.ticket_id, item.status, _safe(processor, item))


def mark_duplicates(outcomes: Iterable[Outcome]) -> Iterator[Outcome]:
    """Quarantine a ticket whose id an earlier readable ticket already had.

    The local readers do this as they read, in order; an executor that reads
    files in parallel needs it after the fact, with the same reason text."""
    first_seen: dict[str, str] = {}
    for outcome in outcomes:
        if outcome.status is not None and outcome.ticket_id is not None:
            first = first_seen.get(outcome.ticket_id)
            if first is None:
                first_seen[outcome.ticket_id] = outcome.origin.describe()
            else:
                reason = f"duplicate ticket_id (first seen at {first})"
                outcome = Outcome(outcome.origin, outcome.ticket_id, None,
                                  Quarantined(outcome.origin, reason, outcome.ticket_id))
        yield outcome


def _safe(processor: Callable[[Ticket], Processed | Skipped | Quarantined],
          ticket: Ticket) -> Processed | Skipped | Quarantined:
    try:
        return processor(ticket)
    except EndpointError:  # a refused or missing key: every ticket would fail the same way, stop the run
        raise
    except Exception as exc:  # one bad ticket must not stop the run, nor leak its text
        return Quarantined(ticket.origin, f"processing failed ({type(exc).__name__})", ticket.ticket_id)


@dataclass
class ProcessorFactory:
    """Picklable recipe for a :class:`TicketProcessor` (``canned`` included:
    every worker process and Ray actor cuts the same lines)."""

    config: PipelineConfig
    kb_docs: list[KnowledgeDoc] | None = None
    tool_schemas: dict[str, dict[str, Any]] | None = None
    annotator: AnnotatorSpec = field(default_factory=AnnotatorSpec)
    canned: CannedLines | None = None
    kb_deidentified: bool = False  # kb_docs went through de-identification already

    def __call__(self) -> TicketProcessor:
        return TicketProcessor(self.config, self.kb_docs, self.tool_schemas, self.annotator, self.canned,
                               self.kb_deidentified)

    def deidentified_kb(self) -> ProcessorFactory:
        """This recipe with its knowledge documents de-identified here, once,
        so that the processes or Ray actors it is sent to do not each do it
        again (a large ``--kb`` folder costs every worker the same seconds)."""
        if not self.kb_docs or self.kb_deidentified:
            return self
        return replace(self, kb_docs=Deidentifiers(self.config).documents(self.kb_docs), kb_deidentified=True)


class LazyProcessor:
    """Builds the (heavy: spaCy, Presidio) processor on first real use, so a
    worker that only ever sees quarantined or ineligible items never loads it.
    ``on_load`` is called just before that load starts (to say so: it takes
    seconds)."""

    def __init__(self, factory: ProcessorFactory, on_load: Callable[[], None] | None = None) -> None:
        self.factory = factory
        self.on_load = on_load
        self._processor: TicketProcessor | None = None

    def __call__(self, ticket: Ticket) -> Processed | Skipped | Quarantined:
        return self._loaded()(ticket)

    def _loaded(self) -> TicketProcessor:
        if self._processor is None:
            if self.on_load is not None:
                self.on_load()
            self._processor = self.factory()
        return self._processor

    def prefetch(self, items: Iterable[Ticket | Quarantined], statuses: frozenset[str]) -> None:
        """:meth:`TicketProcessor.prefetch` for the items ``settle`` will hand
        to the processor (none: nothing is loaded)."""
        eligible = [item for item in items if _eligible(item, statuses)]
        if len(eligible) < 2:
            return
        try:
            processor = self._loaded()
        except Exception:  # noqa: BLE001 -- the load fails again under settle(), which handles it as ever
            return
        prefetch = getattr(processor, "prefetch", None)  # a processor of your own may have none
        if prefetch is not None:
            prefetch(eligible)


_WORKER: LazyProcessor | None = None


def _init_worker(factory: ProcessorFactory) -> None:
    """Pool initializer.  Workers ignore SIGINT: a Ctrl-C in a terminal goes
    to the whole process group, and only the main process handles it (it
    shuts the pool down); a worker that also raised KeyboardInterrupt would
    print its own traceback.  SIGINT arrives blocked (see
    :func:`_pool_without_sigint`), so no window exists before this runs."""
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _WORKER = LazyProcessor(factory)


def _pool_without_sigint(context: Any, jobs: int, factory: ProcessorFactory) -> Any:
    """A process pool whose workers ignore SIGINT from their first
    instruction: SIGINT is blocked while the pool forks its workers (and
    starts its helper threads, which then never take the signal), so a
    Ctrl-C in that moment waits for the main thread instead of reaching a
    worker before its initializer ran."""
    if not hasattr(signal, "pthread_sigmask"):
        return context.Pool(jobs, initializer=_init_worker, initargs=(factory,))
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return context.Pool(jobs, initializer=_init_worker, initargs=(factory,))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _settle_chunk(items: list[Ticket | Quarantined], statuses: frozenset[str]) -> list[Outcome]:
    assert _WORKER is not None
    _WORKER.prefetch(items, statuses)
    return [settle(_WORKER, item, statuses) for item in items]


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _eligible(item: Ticket | Quarantined, statuses: frozenset[str]) -> bool:
    """Whether ``settle`` hands ``item`` to the processor (which then loads)."""
    return isinstance(item, Ticket) and item.status in statuses


def local_outcomes(items: Iterable[Ticket | Quarantined], factory: ProcessorFactory,
                   statuses: Iterable[str], jobs: int, chunk_size: int = 8,
                   on_load: Callable[[], None] | None = None) -> Iterator[Outcome]:
    """The local executor: settle ``items`` on ``jobs`` processes, yielding in
    input order.  At most ``2 * jobs`` chunks are in flight, so memory stays
    bounded whatever the input size (``Pool.imap`` would read ahead without
    limit).  ``on_load`` is called once, in this process, just before the
    first ticket that needs the models is handed to a processor (which loads
    them then); never when no ticket does.

    Workers ignore SIGINT; a KeyboardInterrupt in this process (or closing
    this generator early) terminates the pool before it propagates."""
    wanted = frozenset(statuses)
    if jobs <= 1:
        processor = LazyProcessor(factory, on_load)
        for chunk in _chunks(items, chunk_size):
            processor.prefetch(chunk, wanted)
            for item in chunk:
                yield settle(processor, item, wanted)
        return
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with _pool_without_sigint(context, jobs, factory) as pool:
        pending: deque[Any] = deque()
        for chunk in _chunks(items, chunk_size):
            if on_load is not None and any(_eligible(item, wanted) for item in chunk):
                on_load()
                on_load = None
            pending.append(pool.apply_async(_settle_chunk, (chunk, wanted)))
            while len(pending) >= 2 * jobs:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()
