"""A wheel holds every package of cirrus/: setuptools installs only the
packages pyproject.toml lists, so a new sub-package left out would be
missing from a non-editable install (tests run against the editable one and
would not see it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_for_the_wheel():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "cirrus").rglob("__init__.py")}
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
