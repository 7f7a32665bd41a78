"""The --kb documents are de-identified once per ingest, not once per worker:
with several processes (or Ray actors) the driver de-identifies them and
sends them to the workers as they are (issue 28: ingest at scale)."""

from __future__ import annotations

import pytest

import cirrus.ingest.run as run_module
from cirrus.ingest.deid.deidentify import Deidentifiers
from cirrus.ingest.knowledge import load_kb
from cirrus.ingest.pipeline import ProcessorFactory, TicketProcessor
from cirrus.ingest.run import IngestOptions, run_ingest
from tests.conftest import SAMPLE_KB, SAMPLE_RAW


@pytest.fixture(scope="module")
def kb_docs():
    return load_kb(SAMPLE_KB)[:3]


def test_the_factory_deidentifies_its_documents_once(pipeline_config, kb_docs, monkeypatch):
    factory = ProcessorFactory(config=pipeline_config, kb_docs=kb_docs)
    cleaned = factory.deidentified_kb()
    assert cleaned.kb_deidentified and not factory.kb_deidentified
    assert cleaned.kb_docs == Deidentifiers(pipeline_config).documents(kb_docs)
    assert cleaned.deidentified_kb() is cleaned  # not twice

    def refuse(self, docs):
        raise AssertionError("a worker de-identified the documents again")

    monkeypatch.setattr(Deidentifiers, "documents", refuse)
    processor = cleaned()  # what a worker process or Ray actor builds
    assert isinstance(processor, TicketProcessor) and processor.kb is not None
    with pytest.raises(AssertionError, match="again"):
        factory()  # a recipe with raw documents still de-identifies them (one process: no driver pass)


def test_a_factory_without_documents_is_left_alone(pipeline_config):
    factory = ProcessorFactory(config=pipeline_config)
    assert factory.deidentified_kb() is factory


@pytest.mark.parametrize(("jobs", "once_in_the_driver"), [(1, False), (2, True)])
def test_run_ingest_sends_the_workers_deidentified_documents(tmp_path, pipeline_config, monkeypatch, jobs,
                                                              once_in_the_driver):
    seen = []

    def outcomes(items, factory, statuses, jobs, on_load=None):
        seen.append(factory)
        yield from ()  # a generator, as the executor's is (run_ingest closes it)

    monkeypatch.setattr(run_module, "local_outcomes", outcomes)
    run_ingest(IngestOptions(raw_path=SAMPLE_RAW, workspace=tmp_path / "ws", pipeline=pipeline_config,
                             kb_dir=SAMPLE_KB, jobs=jobs, progress=False))
    assert len(seen) == 1 and seen[0].kb_docs
    assert seen[0].kb_deidentified is once_in_the_driver
    if once_in_the_driver:
        originals = {doc.doc_id: doc.text for doc in load_kb(SAMPLE_KB)}
        assert any(doc.text != originals.get(doc.doc_id) for doc in seen[0].kb_docs)  # something was masked


def test_a_missing_annotator_key_fails_before_the_models_load(tmp_path, pipeline_config, monkeypatch):
    from cirrus.ingest.pipeline import AnnotatorSpec
    from cirrus.llm.providers import Endpoint, EndpointError

    monkeypatch.delenv("CIRRUS_NO_SUCH_KEY", raising=False)

    def no_models(self, pipeline):
        raise AssertionError("the de-identification models were loaded first")

    monkeypatch.setattr(Deidentifiers, "__init__", no_models)
    spec = AnnotatorSpec(Endpoint("annot", "http://127.0.0.1:9/v1", "CIRRUS_NO_SUCH_KEY"))
    with pytest.raises(EndpointError, match="CIRRUS_NO_SUCH_KEY"):
        TicketProcessor(pipeline_config, annotator=spec)  # one process, or a worker
    for jobs in (1, 2):  # one process; several (the documents de-identified in this one first)
        with pytest.raises(EndpointError, match="CIRRUS_NO_SUCH_KEY"):
            run_ingest(IngestOptions(raw_path=SAMPLE_RAW, workspace=tmp_path / f"ws{jobs}", pipeline=pipeline_config,
                                     kb_dir=SAMPLE_KB, jobs=jobs, progress=False, annotator=spec))
