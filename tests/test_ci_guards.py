"""The suite's own guards (tests/conftest.py): in CI (``CI=true``) a missing
prerequisite fails a test instead of skipping it, and property tests draw the
same examples on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TAU_BENCH, in_ci, shared_missing_reason, skip_or_fail

REASON = "the widget is not installed"


@pytest.mark.parametrize("value", [None, "", "false", "0", "1", "yes"])
def test_outside_ci_a_missing_prerequisite_skips(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match=REASON):
        skip_or_fail(REASON)


@pytest.mark.parametrize("value", ["true", "True"])
def test_in_ci_a_missing_prerequisite_fails_with_the_same_reason(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match=REASON):
        skip_or_fail(REASON)


def test_a_missing_chromium_fails_the_browser_tests_in_ci(monkeypatch):
    from tests import test_report_html

    monkeypatch.setattr(test_report_html.shutil, "which", lambda name, *args, **kwargs: None)
    monkeypatch.setattr(test_report_html.os, "access", lambda path, mode, *args, **kwargs: False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        test_report_html._chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        test_report_html._chromium()


def test_the_shared_data_reason_names_the_file():
    assert shared_missing_reason(TAU_BENCH).startswith(f"{TAU_BENCH} is absent")


# --------------------------------------------------------------------------
# In a pytest run of its own (the conftest's hooks and profile as CI sees them)
# --------------------------------------------------------------------------


def _pytest(tmp_path: Path, ci: bool, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_")) and k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rsE",
                           *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _project(tmp_path: Path, test_file: str) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F401,F403\n")
    (tmp_path / "test_inner.py").write_text(test_file)


SHARED_TESTS = '''
from pathlib import Path
from tests.conftest import needs_shared

HERE = Path(__file__)
MISSING = HERE.parent / "no-such-dir" / "data.json"

@needs_shared(MISSING)
def test_reads_missing_data():
    pass

@needs_shared(HERE)
def test_reads_present_data():
    pass
'''


def test_needs_shared_skips_outside_ci_and_fails_in_ci(tmp_path):
    _project(tmp_path, SHARED_TESTS)
    missing = str(tmp_path / "no-such-dir" / "data.json")
    outside = _pytest(tmp_path, ci=False)
    assert outside.returncode == 0, outside.stdout + outside.stderr
    assert "1 passed, 1 skipped" in outside.stdout and f"{missing} is absent" in outside.stdout
    inside = _pytest(tmp_path, ci=True)
    assert inside.returncode == 1, inside.stdout + inside.stderr
    assert "1 passed, 1 error" in inside.stdout and "skipped" not in inside.stdout
    assert f"{missing} is absent" in inside.stdout
    assert "test_reads_missing_data" in inside.stdout


PROPERTY_TESTS = '''
import json, os
from hypothesis import given, settings, strategies as st

DRAWN = []

@settings(max_examples=25)  # a test's own settings keep the profile's derandomize
@given(st.lists(st.integers(), max_size=5), st.text(max_size=5))
def test_draws(numbers, text):
    DRAWN.append([numbers, text])

def test_zz_profile_and_record():
    current = settings.default
    assert current.derandomize and current.deadline is None and current.print_blob
    with open(os.environ["DRAWN_FILE"], "w") as handle:
        json.dump(DRAWN, handle)
'''


def test_in_ci_property_tests_draw_the_same_examples_every_run(tmp_path, monkeypatch):
    _project(tmp_path, PROPERTY_TESTS)
    drawn = []
    for run in range(2):
        monkeypatch.setenv("DRAWN_FILE", str(tmp_path / f"drawn-{run}.json"))
        result = _pytest(tmp_path, ci=True)
        assert result.returncode == 0, result.stdout + result.stderr
        drawn.append(json.loads((tmp_path / f"drawn-{run}.json").read_text()))
    assert len(drawn[0]) >= 10
    assert drawn[0] == drawn[1]
