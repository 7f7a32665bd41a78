"""The suite's own scheduling: a module that uses a module-scoped fixture,
and tests marked with one ``xdist_group``, run on one xdist worker
(``--dist loadgroup`` and the grouping hook of tests/conftest.py).

With pytest 9.2 and pytest-xdist 3.8 every ``xdist_group`` mark was ignored
without an error (pytest-xdist#1386): the Ray tests then ran on both workers
at once and each module fixture was built on each worker.  This runs a small
suite with two workers and reads which worker ran each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

RECORD = textwrap.dedent("""
    import json, os
    from pathlib import Path

    def record(name):
        path = Path(os.environ["WORKERS_FILE"])
        with path.open("a") as out:
            out.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER")]) + "\\n")
""")


def _suite(root: Path) -> None:
    (root / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (root / "record.py").write_text(RECORD)
    (root / "test_with_module_fixture.py").write_text(textwrap.dedent("""
        import pytest
        from record import record

        @pytest.fixture(scope="module")
        def shared():
            return object()

        @pytest.mark.parametrize("i", range(8))
        def test_reads_shared(shared, i):
            record("module_fixture")
    """))
    for name in ("test_group_one.py", "test_group_two.py"):
        (root / name).write_text(textwrap.dedent("""
            import pytest
            from record import record

            @pytest.mark.xdist_group("together")
            @pytest.mark.parametrize("i", range(4))
            def test_in_group(i):
                record("group")
        """))
    (root / "test_free.py").write_text(textwrap.dedent("""
        import pytest
        from record import record

        @pytest.mark.parametrize("i", range(16))
        def test_free(i):
            record("free")
    """))


def test_grouped_tests_run_on_one_worker(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    _suite(suite)
    workers_file = tmp_path / "workers.jsonl"
    env = {**os.environ, "WORKERS_FILE": str(workers_file),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(suite)])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                             "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(suite), str(suite)],
                            cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    ran = [json.loads(line) for line in workers_file.read_text().splitlines()]
    workers = {kind: {worker for name, worker in ran if name == kind} for kind in ("module_fixture", "group", "free")}
    assert sum(1 for name, _ in ran if name == "module_fixture") == 8
    assert sum(1 for name, _ in ran if name == "group") == 8
    assert len(workers["module_fixture"]) == 1, workers
    assert len(workers["group"]) == 1, workers
    assert workers["free"] <= {"gw0", "gw1"} and None not in workers["free"]
