"""``report.html``: the page of ``cirrus report`` on real baseline runs of the
sample workspace and on hand-made runs (self-contained, every link has its
target, ticket text escaped, TPR by depth exact), then opened in a real
headless browser (Debian's chromium; skipped when it is not installed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from cirrus.report.command import report_command
from cirrus.report.html import HTML_FILE, render_html
from cirrus.report.loading import load_runs
from cirrus.report.views.depth import depth_table
from tests.conftest import copy_workspace, skip_or_fail
from tests.test_report_tables import (
    RUN_A_CHECKPOINTS,
    RUN_A_TASKS,
    RUN_B_CHECKPOINTS,
    RUN_B_TASKS,
    TASKS,
    write_run,
)

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> & </pre></div>'


class _Page(HTMLParser):
    """Ids, fragment links, tags and external references of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.fragments: list[str] = []
        self.tags: dict[str, int] = {}
        self.external: list[str] = []
        self.classes: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            value = value or ""
            if name == "id":
                self.ids.append(value)
            elif name == "class":
                for c in value.split():
                    self.classes[c] = self.classes.get(c, 0) + 1
            elif name in ("href", "xlink:href", "src"):
                if value.startswith("#"):
                    self.fragments.append(value[1:])
                else:
                    self.external.append(value)



def _section_charts(text: str) -> int:
    """Charts of the Dataset, failure-category, Cost and Subtasks sections (tested in
    test_report_sections.py and test_report_cost.py)."""
    return len(re.findall(r'aria-label="chart-(?:dataset-[a-z-]+|failures|cost-quality|subtask-reply-type)"', text))

def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def _tables(files: dict[str, Path]) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(path) for name, path in files.items() if name.endswith(".parquet")}


def _html_for(workspace: Path, run_ids: list[str], bootstrap: int = 200) -> tuple[Path, dict]:
    """``cirrus report`` of ``run_ids``: the report.html it wrote, and its result.

    The command writes the page with :func:`write_html_report` itself; this
    used to write it a second time from the Parquet files read back, which
    gave the same page byte for byte but for its "generated" time (checked
    when the second write was dropped), at the cost of another render."""
    result = report_command(run_ids, workspace, None, bootstrap)
    path = result["files"][HTML_FILE]
    assert path == result["out_dir"] / HTML_FILE and path.is_file()
    return path, result


@pytest.fixture(scope="module")
def sample(tmp_path_factory, sample_runs) -> Path:
    """The sample workspace with an oracle and a retrieval run; the first
    customer message of the oracle run carries HTML to be escaped."""
    workspace = copy_workspace(sample_runs, tmp_path_factory.mktemp("report-html") / "ws")
    transcripts = workspace / "reports/oracle/transcripts.jsonl"
    lines = transcripts.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["turns"][0]["query"] = HOSTILE + first["turns"][0]["query"]
    first["turns"][0]["verdicts"][0]["raw"] = HOSTILE
    lines[0] = json.dumps(first)
    transcripts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return workspace


@pytest.fixture(scope="module")
def sample_html(sample: Path) -> Path:
    path, _ = _html_for(sample, ["oracle", "retrieval"])
    return path


# --------------------------------------------------------------------------
# The page as text
# --------------------------------------------------------------------------


def test_page_is_self_contained_with_all_sections(sample_html: Path):
    assert sample_html.name == HTML_FILE
    assert sample_html.parent.name == "oracle+retrieval"
    text = sample_html.read_text(encoding="utf-8")
    page = _parse(text)
    # one file: no script, stylesheet link, image or font from elsewhere
    assert page.external == []
    assert "<script" not in text.replace("&lt;script", "")
    assert page.tags.get("link", 0) == 0 and page.tags.get("img", 0) == 0
    assert "http://" not in re.sub(r'xmlns(:\w+)?="[^"]+"', "", text).replace("http://www.w3.org", "")
    assert "@import" not in text and "url(http" not in text
    # leaderboard, every chart (matplotlib SVG inline), the task table
    for section in ("leaderboard", "breakdowns", "quality-latency", "depth", "reply-type", "tasks"):
        assert section in page.ids
    for chart in ("leaderboard", "category", "checkpoints", "input_tokens", "tools", "language", "channel",
                  "reply_type", "quality-latency", "depth"):
        assert f'aria-label="chart-{chart}"' in text, chart
    # the run charts, plus the dataset's and the failure categories' own sections (tests/test_report_sections.py)
    assert page.classes.get("chart") == 10 + _section_charts(text)
    assert page.tags["svg"] == 10 + _section_charts(text)
    # error bars: matplotlib draws them as line collections next to the bars
    assert text.count('id="chart-leaderboard-LineCollection_') >= 1


def test_every_link_has_its_target_and_ids_are_unique(sample: Path, sample_html: Path):
    page = _parse(sample_html.read_text(encoding="utf-8"))
    ids = page.ids
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})[:5]
    missing = sorted(set(page.fragments) - set(ids))
    assert missing == []
    # one transcript per (task, attempt, run), each linked from the task table
    for run_id in ("oracle", "retrieval"):
        attempts = pl.read_parquet(sample / "reports" / run_id / "tasks.parquet").select("task_id", "attempt")
        for task_id, attempt in attempts.iter_rows():
            anchor = f"t-{task_id}-{attempt}-{run_id}"
            assert anchor in ids and anchor in page.fragments
    assert page.classes["transcript"] == 124


def test_ticket_text_is_escaped(sample_html: Path):
    text = sample_html.read_text(encoding="utf-8")
    assert HOSTILE not in text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in text
    assert _parse(text).tags.get("script", 0) == 0


def test_transcript_shows_turn_tool_calls_and_verdicts(sample_html: Path):
    text = sample_html.read_text(encoding="utf-8")
    start = text.index('id="t-NC-2024-0311-0-oracle"')
    section = text[start:text.index("</article>", start)]
    for part in ("Customer", "Agent under test", "Reference reply", "agent calls <b>DescribeInstanceStatus</b>",
                 "replayed result", "&#34;status&#34;: &#34;Running&#34;", "raw judge output",
                 "Included (offline heuristic"):
        assert part in section, part


def test_without_intervals_or_transcripts(tmp_path: Path):
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(tmp_path, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    write_run(tmp_path, "b", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    path, result = _html_for(tmp_path, ["a", "b"], bootstrap=0)
    text = path.read_text(encoding="utf-8")
    page = _parse(text)
    assert "No confidence intervals" in text
    assert "has no transcripts.jsonl" in text
    assert not any(f.startswith("t-") for f in page.fragments)  # no transcript, no link
    assert set(page.fragments) <= set(page.ids)
    assert page.tags["svg"] == 10 + _section_charts(text)
    # the tables alone (as the command's dict keys or bare names) give the same charts
    runs = load_runs(tmp_path, ["a", "b"])
    bare = {name.removesuffix(".parquet"): frame for name, frame in _tables(result["files"]).items()}
    again = render_html(runs, bare, tmp_path)
    assert again.count("<svg") == 10 + _section_charts(again)


def test_depth_table_counts(tmp_path: Path):
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(tmp_path, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    frame = depth_table({run.run_id: run.tasks for run in load_runs(tmp_path, ["a"])})
    # ok attempts (K, covered): T1 (2, 2), (2, 0); T2 (3, 1), (3, 3); T3 (5, 5); errors left out
    assert frame.select("depth", "n", "covered").rows() == [(1, 5, 4), (2, 5, 3), (3, 3, 2), (4, 1, 1), (5, 1, 1)]
    assert frame["share"].to_list() == pytest.approx([0.8, 0.6, 2 / 3, 1.0, 1.0])


# --------------------------------------------------------------------------
# In a real browser
# --------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found is None:
        skip_or_fail("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
    return found


def _browse(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    command = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _page_errors(stderr: str) -> list[str]:
    """Console messages of the page (chromium logs them as CONSOLE lines)
    and uncaught errors; chromium's own noise (dbus, gpu) is ignored."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line or "Uncaught" in line]


def _content_box(path: Path) -> tuple[int, int, tuple[int, int, int, int] | None, int]:
    """Size of a screenshot, the box around everything not white, and how
    many distinct colours it has."""
    from PIL import Image, ImageChops

    with Image.open(path) as image:
        rgb = image.convert("RGB")
        box = ImageChops.invert(rgb.convert("L")).point(lambda v: 255 if v > 8 else 0).getbbox()
        colors = rgb.getcolors(maxcolors=1 << 20)
        return rgb.width, rgb.height, box, len(colors or [])


def test_browser_console_errors_are_seen(tmp_path: Path):
    """The check below means something: a page that logs and throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); undefinedFn();</script>hi</body></html>')
    result = _browse(tmp_path, "--dump-dom", bad.as_uri())
    errors = _page_errors(result.stderr)
    assert any("boom" in e for e in errors) and any("Uncaught" in e for e in errors), result.stderr[-2000:]


def test_browser_dom_has_charts_and_working_links(sample_html: Path, tmp_path: Path):
    result = _browse(tmp_path, "--dump-dom", sample_html.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert _page_errors(result.stderr) == []
    page = _parse(dom)
    assert page.tags.get("svg") == 10 + _section_charts(dom)
    assert dom.count("<path") > 100 and dom.count("<text") > 50  # the charts' shapes and labels
    assert page.fragments and set(page.fragments) <= set(page.ids)
    assert "t-NC-2024-0311-0-oracle" in page.ids
    assert HOSTILE not in dom and page.tags.get("script", 0) == 0


def test_browser_screenshot_and_transcript_view(sample_html: Path, tmp_path: Path):
    top = tmp_path / "top.png"
    result = _browse(tmp_path, f"--screenshot={top}", "--window-size=1280,2000", sample_html.as_uri())
    assert result.returncode == 0 and top.is_file(), result.stderr[-2000:]
    assert _page_errors(result.stderr) == []
    width, height, box, colors = _content_box(top)
    assert (width, height) == (1280, 2000)
    assert box is not None and box[3] - box[1] > 1500  # drawn from top to bottom
    assert colors > 50  # text, tables and charts in colour, not a blank page
    # a transcript is shown only when the page is opened at its anchor: a
    # window taller than the page (so that nothing scrolls) shows it below
    # the task table, and the page is otherwise the same
    plain, anchored = tmp_path / "plain.png", tmp_path / "anchored.png"
    for shot, url in ((plain, sample_html.as_uri()), (anchored, sample_html.as_uri() + "#t-NC-2024-0311-0-oracle")):
        result = _browse(tmp_path, f"--screenshot={shot}", "--window-size=1280,16000", url)
        assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
        assert _page_errors(result.stderr) == []
    plain_box, anchored_box = _content_box(plain)[2], _content_box(anchored)[2]
    assert plain_box is not None and anchored_box is not None
    assert anchored_box[3] > plain_box[3] + 500  # the transcript's turns, below the task table
