"""``cirrus ingest --annotator-model M --batch``: the annotator's calls at the
provider's batch price (docs/batch.md).

The annotator (or checkpoint selector) runs inside the pipeline's worker
processes, one call per ticket, after de-identification.  In batch mode
ingest runs twice:

1. a first pass into a scratch workspace under ``.cirrus-cache/batches/``
   with every annotator request collected instead of sent
   (:mod:`cirrus.ingest.annotate.requests`); the tickets get rule labels
   there, and the scratch workspace is deleted;
2. the requests go to the provider's Batch API in one batch
   (:func:`cirrus.llm.batch.run_batch`: resumable by running the same
   command again, a clear error when the provider has no batch endpoint);
3. the real pass reads each ticket's answer by its request id.
   De-identification is deterministic, so every request of the second pass
   is one of the first; an answer that is missing (a request the batch
   failed) or unreadable makes that ticket fall back to the rules, as an
   unreadable online answer does (counted in ``annotator_fallbacks``).

The price is de-identifying twice (the CPU of ingest, doubled) for half the
annotator's bill; the manifest's ``usage.annotator`` counts the calls as
``batch_calls``.  Each pass runs the corpus pass of :func:`run_ingest`
(docs/canned-lines.md) on the same input, which finds the same canned lines,
so the requests of the first pass are the tickets of the second.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cirrus.files import atomic_writer
from cirrus.ingest.run import IngestOptions, IngestSummary, config_hash, run_ingest

BATCH_DIR = Path(".cirrus-cache") / "batches"


def batch_folder(options: IngestOptions) -> Path:
    """Where one ingest's batch state lives: by workspace and configuration,
    so the same command finds it again."""
    return options.workspace / BATCH_DIR / f"ingest-{config_hash(options)}"


def run_ingest_batched(options: IngestOptions, *, notify: Callable[[str], None] = lambda line: None,
                       poll_interval_s: float | None = None) -> IngestSummary:
    """Ingest with the annotator's requests sent through the Batch API (see
    the module docstring).  ``options.annotator.endpoint`` must be set.
    Raises what :func:`cirrus.llm.batch.run_batch` raises
    (``BatchUnsupported``, ``BatchFailed``, ...)."""
    from cirrus.llm.batch import BatchRequest, run_batch
    from cirrus.llm.batching import poll_interval
    from cirrus.llm.client import make_openai_client

    endpoint = options.annotator.endpoint
    if endpoint is None:
        raise ValueError("--batch needs --annotator-model: only the annotator's calls go through a batch")
    folder = batch_folder(options)
    answers = folder / "answers.jsonl"
    if not answers.exists():
        scratch = folder / "first-pass"
        notify("batch: first pass, collecting the annotator's requests (nothing is sent yet)")
        first = run_ingest(replace(options, workspace=scratch, annotator=replace(options.annotator, collect=True)))
        shutil.rmtree(scratch, ignore_errors=True)
        requests = [BatchRequest(key, body) for key, body in sorted(first.requests.items())]
        notify(f"batch: {len(requests)} annotator requests to {endpoint.model} (state: {folder / 'state.json'})")

        async def send() -> dict:
            client = make_openai_client(endpoint, 600.0)
            try:
                return await run_batch(client, requests, folder / "state.json",
                                       poll_interval_s=poll_interval() if poll_interval_s is None else poll_interval_s)
            finally:
                await client.close()

        outcomes = asyncio.run(send()) if requests else {}
        failed = sum(1 for outcome in outcomes.values() if outcome.response is None)
        if failed:
            notify(f"batch: {failed} of {len(requests)} requests got no answer; those tickets get rule labels")
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_writer(answers) as out:
            for key, outcome in sorted(outcomes.items()):
                if outcome.response is not None:
                    out.write(json.dumps({"custom_id": key, "response": outcome.response}, ensure_ascii=False) + "\n")
    notify("batch: writing the workspace with the batch's answers")
    summary = run_ingest(replace(options, annotator=replace(options.annotator, answers_path=answers)))
    shutil.rmtree(folder, ignore_errors=True)  # done: a later ingest starts afresh
    return summary
