"""What business a workspace's tickets come from: the one line every prompt
of Cirrus (the agent's default system prompt, the coverage judge, the
fluency checker, the ingest annotator) says about it.

No prompt assumes a domain: without a description they speak of "a
customer-service conversation" and nothing more.  A description comes from,
first to last:

1. ``[domain]`` of ``cirrus.toml`` (``description``, and ``description_zh``
   for the same in Chinese), read by :func:`cirrus.settings.load_settings`,
   which makes it the configured one (:func:`configure`), as it does for the
   ``[judge_input]`` limits;
2. ``domain`` of the workspace's ``tickets/manifest.json``, which ingest
   writes from the pipeline's ``[domain]`` section;
3. none (the neutral prompts).

The description is part of every prompt it enters, so the prompts' hashes in
a run's fingerprint change with it: runs of workspaces described differently
are marked as not comparable, and a run cannot be resumed with another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_DESCRIPTION_CHARS = 500


@dataclass(frozen=True)
class Domain:
    """A workspace's business, in English and/or Chinese (either may be empty)."""

    description: str = ""
    description_zh: str = ""

    def __post_init__(self) -> None:
        for name in ("description", "description_zh"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"domain {name} must be text, got {type(value).__name__}")
            if len(value) > MAX_DESCRIPTION_CHARS:
                raise ValueError(f"domain {name} is {len(value)} characters long; keep it under "
                                 f"{MAX_DESCRIPTION_CHARS} (one line on what the business sells and supports)")
            object.__setattr__(self, name, " ".join(value.split()))

    @property
    def is_set(self) -> bool:
        return bool(self.description or self.description_zh)

    def text(self) -> str:
        """The description as the prompts show it: the English one, the
        Chinese one, or both (``English (中文)``) when both are given and differ."""
        english, chinese = self.description, self.description_zh
        if english and chinese and english != chinese:
            return f"{english} ({chinese})"
        return english or chinese

    def to_dict(self) -> dict[str, str]:
        """For ``manifest.json``: only the descriptions given."""
        return {key: value for key, value in (("description", self.description),
                                              ("description_zh", self.description_zh)) if value}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any] | None) -> Domain:
        if not isinstance(value, Mapping):
            return cls()
        return cls(str(value.get("description") or ""), str(value.get("description_zh") or ""))


NEUTRAL = Domain()


def with_domain(prompt: str, domain: Domain) -> str:
    """``prompt`` followed by the line naming the business, when ``domain`` is set."""
    return f"{prompt}\nThe conversations come from the customer service of {domain.text()}." if domain.is_set \
        else prompt
_configured: Domain | None = None


def configure(domain: Domain | None) -> None:
    """Make ``domain`` (``[domain]`` of the loaded ``cirrus.toml``; None: the
    file had none) the one the roles built from now on use."""
    global _configured
    _configured = domain if domain is not None and domain.is_set else None


def manifest_domain(workspace: Path) -> Domain:
    """``domain`` of ``<workspace>/tickets/manifest.json`` (none when absent or unreadable)."""
    from cirrus.workspace import MANIFEST_FILE

    try:
        manifest = json.loads((workspace / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return NEUTRAL
    try:
        return Domain.from_dict(manifest.get("domain") if isinstance(manifest, dict) else None)
    except (TypeError, ValueError):
        return NEUTRAL


def workspace_domain(workspace: Path) -> Domain:
    """The domain of a run in ``workspace``: the configured ``[domain]`` of
    ``cirrus.toml``, else the workspace manifest's, else none."""
    return _configured if _configured is not None else manifest_domain(workspace)


__all__ = ["Domain", "NEUTRAL", "configure", "manifest_domain", "with_domain", "workspace_domain"]
