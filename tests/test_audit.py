"""``cirrus audit``: what the scanner finds, what it must not flag, how files
are walked and read, and the command (exit codes, masked output)."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import polars as pl
import pytest
import typer
import yaml
from typer.testing import CliRunner

from cirrus.audit import (
    _OVERLAP,
    AllowList,
    Hit,
    _pieces,
    _scan_parquet,
    _scan_prepared,
    audit,
    luhn,
    mask,
    scan_text,
    workspace_files,
)
from cirrus.commands.audit import audit as audit_command
from tests.conftest import REPO

FOUND = [
    ("email", "laura.chen@brightleaf.io"),
    ("email", "ops+alerts@mail.example-corp.co.uk"),
    ("email", "john_doe@harborline.com"),
    ("phone", "+1 415 555 0199"),
    ("phone", "+44 20 7946 0958"),
    ("phone", "+33 6 12 34 56 78"),
    ("phone", "+8613912345678"),
    ("phone", "13912345678"),  # Chinese mobile, written plain
    ("phone", "(415) 555-0199"),
    ("phone", "415-555-0199"),
    ("phone", "415.555.0199"),
    ("phone", "020 7946 0958"),
    ("phone", "06.12.34.56.78"),
    ("card", "4111 1111 1111 1111"),
    ("card", "5500-0000-0000-0004"),
    ("card", "378282246310005"),  # Amex, 15 digits
    ("card", "4222222222222"),  # Visa, 13 digits
    ("key", "AKIAIOSFODNN7EXAMPLE"),
    ("key", "ASIAY34FZKBOKMUTVV7A"),
    ("key", "LTAI5tB8qR3mXw9KfZ2pLs7d"),
    ("key", "sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A"),
    ("key", "sk-proj-Xq81LmZ0vB7cN3sT9wK2pR5yH4jD6fGa"),
    ("key", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
    ("key", "-----BEGIN RSA PRIVATE KEY-----"),
    ("ip", "10.24.8.17"),
    ("ip", "192.168.1.20"),
    ("ip", "172.19.32.6/32"),
    ("ip", "47.96.12.201"),
    ("ip", "47.98.112.0/24"),  # a public customer range
    ("ip", "1.2.3.4"),  # a dotted quad with no version word before it is an address
    ("ip", "2408:4003:1f40:9a00:5c2e:8b1d:3e7a:41c2"),
    ("ip", "fe80::1c2e:8b1d:3e7a:41c2"),
    ("ip", "fd12:3456:789a::1"),
]

SECRETS = [  # (text, the secret value found in it)
    ("api_key=Zx8vQ2mK9pL4tR7wB3nY6cF1", "Zx8vQ2mK9pL4tR7wB3nY6cF1"),
    ('{"access_key_secret": "Zx8vQ2mK9pL4tR7wB3nY6cF1"}', "Zx8vQ2mK9pL4tR7wB3nY6cF1"),
    ("client_secret: 9f86d081884c7d659a2feaa0c55ad015", "9f86d081884c7d659a2feaa0c55ad015"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.Qm9vaz1",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.Qm9vaz1"),
    ("log in at https://admin:Secr3tPass@mail.brightleaf.io/webmail", "admin:Secr3tPass"),
]

NOT_FOUND = [
    # what the ingest pipeline writes for masked values (format-shaped masks and tags)
    "ja***@g***.com", "***@g***.com", "157****3190", "*******90", "**** **** **** 1111", "************1111",
    "47.***.***.***", "172.***.***.***~2", "2400:****:****::****", "LTAI************", "sk-*****************",
    "i-bp*****************d", "Gr*** Wa***", "https://***:***@mail.brightleaf.io/", "<EMAIL_ADDRESS_1>", "[PHONE]",
    "<PHONE_NUMBER_2>",
    # dates, times, timestamps
    "2024-05-01", "2024-05-01T10:30:00Z", "2025-03-05 11:02:15", "10:30:00", "at 09:15:27.123", "20250305",
    "01.05.2024", "05/01/2024", "from 2024-05-01 to 2024-06-01", "1732051200", "1732051200123",
    # versions, numbers, ids, prices
    "version 1.2.3.4", "build 10.0.19045.3693", "v1.2.3.4", "Chrome 120.0.6099.129", "OID 1.3.6.1.4.1.311.21.8",
    "amtl 84.05537634408603", "wall_s 0.0071", "$1,234.56", "¥13800138000", "€ 1.234.567,89", "size=83883999",
    "4155550199", "ORD-20240501-0012", "order #2025022011845", "order number 2025022011845527", "NC-2025-0001",
    "6A1C7E0B-31F2-4D8A-9C55-0E2B7D4F1A93", "port 8080, 443", "input_tokens: 12345678901234567",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    # cards: Luhn fails, no network prefix, one digit repeated
    "4111 1111 1111 1112", "1029384756102938", "2025022011845527", "0000 0000 0000 0000",
    # reserved and well-known addresses, ranges, netmasks
    "127.0.0.1", "0.0.0.0", "0.0.0.0/0", "255.255.255.0", "::1", "::", "10.0.0.0/8", "172.16.0.0/12", "fd00::/8",
    "203.0.113.10", "198.51.100.7", "192.0.2.1", "2001:db8::/64", "224.0.0.1", "8.8.8.8", "100.100.100.200",
    "169.254.169.254", "std::string", "mac 00:**:**:**:**:5e",  # a MAC is no IPv6 (a real one is a device_id)
    # e-mail documentation domains, key look-alikes, weak "secrets"
    "help@nimbus.example", "admin@example.com", "root@localhost", "sk-learn-tutorial-for-beginners",
    "ASIAPACIFICREGIONXX", "key: your-api-key-here", "password=aaaaaaaaaaaaaaaaaaaa", "token: 1234567890123456",
    "the cache_key=tickets/tasks.jsonl",
]


def _found(text: str) -> list[tuple[str, str]]:
    return [(h.kind, h.value) for h in scan_text(text)]


@pytest.mark.parametrize("kind, value", FOUND)
def test_personal_values_and_keys_are_found(kind, value):
    assert _found(f"note: {value}, see above") == [(kind, value)]


@pytest.mark.parametrize("text, value", SECRETS)
def test_assigned_secrets_bearer_tokens_and_url_passwords_are_found(text, value):
    assert _found(text) == [("secret", value)]


@pytest.mark.parametrize("text", NOT_FOUND)
def test_masks_dates_ids_versions_and_reserved_addresses_are_not_hits(text):
    assert scan_text(f"value {text} here") == []


@pytest.mark.parametrize("text, value", [
    ("**laura.chen@brightleaf.io**", "laura.chen@brightleaf.io"),  # Markdown bold is not a mask
    ("*+44 20 7946 0958*", "+44 20 7946 0958"),
    ("电话13912345678", "13912345678"),  # a Chinese character is a boundary
    ("phone: 4155550199", "4155550199"),  # a plain digit run counts after a phone word
    ("call me on 8388 3999", "8388 3999"),
    ('"reply": "thanks\\nnoah\\u0040gmail.com"', "noah@gmail.com"),  # JSON escapes undone
    ('"text": "line\\n13912345678"', "13912345678"),
])
def test_values_next_to_emphasis_escapes_and_cjk_are_found(text, value):
    assert [v for _, v in _found(text)] == [value]


def test_overlapping_findings_keep_the_most_specific_and_come_in_order():
    text = "key sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A then 10.1.2.3 and laura@brightleaf.io"
    assert _found(text) == [("key", "sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A"), ("ip", "10.1.2.3"),
                            ("email", "laura@brightleaf.io")]
    assert _found("api_key=sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A") == [("key", "sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A")]
    assert _found("card 4111111111111111") == [("card", "4111111111111111")]  # not also a phone


def test_luhn():
    for number in ("4111111111111111", "5500000000000004", "378282246310005", "6011111111111117", "79927398713"):
        assert luhn(number)
    for number in ("4111111111111112", "1234567812345678", "79927398710"):
        assert not luhn(number)


def test_a_hit_never_shows_its_value():
    hit = scan_text("write to laura.chen@brightleaf.io")[0]
    assert mask(hit.value) == hit.masked == "la***"
    assert "laura" not in repr(hit) and "laura" not in str(hit) and "laura" not in json.dumps(hit.to_json())
    assert hit == Hit("email", "laura.chen@brightleaf.io", 9)


def test_allow_list_takes_regexes_and_literals():
    allow = AllowList([r"@brightleaf\.io$", "+1 415 555 0199", "("])  # the last two are not valid regexes
    assert allow.allows("laura.chen@brightleaf.io")
    assert allow.allows("+1 415 555 0199") and allow.allows("(")
    assert not allow.allows("+1 415 555 0198") and not allow.allows("laura@brightleaf.io.evil.com")


def test_long_lines_come_in_pieces_and_each_value_is_reported_once():
    rng = random.Random(7)
    values = ["laura.chen@brightleaf.io", "+44 20 7946 0958", "noah\\u0040gmail.com", "4111 1111 1111 1111"]
    for _ in range(50):
        line = "".join("x" * rng.randint(0, 300) + " " + rng.choice(values) + " " for _ in range(30))
        got = []
        for number, text, done, held in _pieces(io.StringIO(line + "\nlast 10.1.2.3\n"), 4 * _OVERLAP):
            got += [(number, h.value) for h in _scan_prepared(text)
                    if done < h.start + len(h.value) <= len(text) - held]
        assert got == [(1, h.value) for h in scan_text(line)] + [(2, "10.1.2.3")]


# -- workspaces ---------------------------------------------------------------------------------

def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test host for the audit command."""

    app.command("audit")(audit_command)
    return app


def _audit(*args: str):
    return CliRunner().invoke(_app(), ["audit", *args])


def _workspace(tmp_path: Path) -> Path:
    """A copy of the committed sample workspace (raw input, knowledge,
    tasks, manifest, cassettes, allow list; not local evaluation runs)."""
    workspace = tmp_path / "ws"
    shutil.copytree(REPO / "tickets", workspace / "tickets")
    shutil.copytree(REPO / "tool_mocks", workspace / "tool_mocks")
    (workspace / "reports").mkdir()
    committed_reports = REPO / "reports"
    for path in committed_reports.iterdir() if committed_reports.is_dir() else ():
        if path.is_file():
            shutil.copy(path, workspace / "reports" / path.name)
    shutil.copy(REPO / ".cirrus-audit-allow", workspace / ".cirrus-audit-allow")
    return workspace


def _plant(workspace: Path, text: str, line: int = 3) -> None:
    """Append ``text`` to the first checkpoint reply of task ``line`` (1-based)."""
    tasks = workspace / "tickets" / "tasks.jsonl"
    lines = tasks.read_text(encoding="utf-8").splitlines()
    task = json.loads(lines[line - 1])
    task["checkpoints"][0]["reply"] += f" {text}"
    lines[line - 1] = json.dumps(task)
    tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_committed_sample_workspace_is_clean(tmp_path):
    result = _audit(str(_workspace(tmp_path)))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "0 hits, clean" in result.stderr


def test_a_real_email_planted_in_tasks_fails_the_audit_and_is_shown_masked(tmp_path):
    workspace = _workspace(tmp_path)
    _plant(workspace, "Write to me at noah.peterson@gmail.com.", line=4)
    result = _audit(str(workspace))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["tickets/tasks.jsonl:4: email no***"]
    assert "1 hit(s): 1 email" in result.stderr
    assert "noah.peterson" not in result.output


def test_no_found_value_is_ever_printed(tmp_path):
    workspace = _workspace(tmp_path)
    planted = [v for _, v in FOUND] + [v for _, v in SECRETS]
    _plant(workspace, " | ".join([v for _, v in FOUND] + [t for t, _ in SECRETS]))
    for args in ((), ("--json",)):
        result = _audit(str(workspace), *args)
        assert result.exit_code == 1
        for value in planted:
            assert value not in result.output
    hits = json.loads(result.stdout)
    assert len(hits) == len(planted)
    assert {h["kind"] for h in hits} == {"email", "phone", "card", "key", "secret", "ip"}
    assert all(h["masked"].endswith("***") and len(h["masked"]) == 5 for h in hits)


def test_json_output_is_a_list_of_located_masked_hits(tmp_path):
    workspace = _workspace(tmp_path)
    run = workspace / "reports" / "r"
    run.mkdir()
    (run / "attempts.jsonl").write_text('{"ok": 1}\n{"reply": "mail noah\\u0040gmail.com"}\n', encoding="utf-8")
    result = _audit(str(workspace), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [
        {"file": "reports/r/attempts.jsonl", "line": 2, "column": None, "kind": "email", "masked": "no***"}]
    clean = _audit(str(_workspace(tmp_path / "other")), "--json")
    assert clean.exit_code == 0 and json.loads(clean.stdout) == []


def test_raw_input_and_hidden_folders_are_skipped_knowledge_is_read(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "tickets" / "raw" / "more.jsonl").write_text('{"text": "laura.chen@brightleaf.io"}\n')
    for hidden in ("reports/.cache/c.json", "tool_mocks/.tmp/x.yaml", "reports/.partial.jsonl"):
        (workspace / hidden).parent.mkdir(parents=True, exist_ok=True)
        (workspace / hidden).write_text('"laura.chen@brightleaf.io"\n')
    files = [p.relative_to(workspace).as_posix() for p in workspace_files(workspace)]
    assert files[:3] == ["tickets/manifest.json", "tickets/tasks.jsonl", "tickets/kb/kb-billing-invoices.md"]
    assert "tool_mocks/NC-2025-0001.yaml" in files and files == sorted(files, key=lambda f: (
        ["tickets", "tool_mocks", "reports"].index(f.split("/")[0]), "/kb/" in f, f))
    assert not [f for f in files if f.startswith("tickets/raw/") or "/." in f]
    assert _audit(str(workspace)).exit_code == 0
    (workspace / "tickets" / "kb" / "kb-contact.md").write_text("Escalations: laura.chen@brightleaf.io\n")
    result = _audit(str(workspace))
    assert result.exit_code == 1 and result.stdout == "tickets/kb/kb-contact.md:1: email la***\n"


def test_allow_file_and_option(tmp_path):
    workspace = _workspace(tmp_path)
    _plant(workspace, "Escalate to support@nimbus-cloud.com or +1 415 555 0199.")
    assert _audit(str(workspace)).exit_code == 1
    assert _audit(str(workspace), "--allow", r"@nimbus-cloud\.com$").exit_code == 1  # the phone is still there
    assert _audit(str(workspace), "--allow", r"@nimbus-cloud\.com$", "--allow", "+1 415 555 0199").exit_code == 0
    with (workspace / ".cirrus-audit-allow").open("a", encoding="utf-8") as handle:
        handle.write("# our own support line\n+1 415 555 0199\n^support@nimbus-cloud\\.com$\n")
    assert _audit(str(workspace)).exit_code == 0
    (workspace / ".cirrus-audit-allow").unlink()  # the sample's DMARC placeholder address comes back
    result = _audit(str(workspace))
    assert result.exit_code == 1 and "email dm***" in result.stdout


def test_binary_files_are_skipped_and_counted_text_files_of_any_name_are_read(tmp_path):
    workspace = _workspace(tmp_path)
    run = workspace / "reports" / "r"
    run.mkdir()
    (run / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 laura.chen@brightleaf.io")
    (run / "dump.bin").write_bytes(b"\x00\x01 laura.chen@brightleaf.io")
    result = _audit(str(workspace))
    assert result.exit_code == 0 and "(2 binary skipped)" in result.stderr
    (run / "notes.weird").write_text("laura.chen@brightleaf.io\n")
    assert _audit(str(workspace)).stdout == "reports/r/notes.weird:1: email la***\n"


def test_parquet_text_list_and_struct_columns_are_read_by_row(tmp_path):
    workspace = _workspace(tmp_path)
    run = workspace / "reports" / "r"
    run.mkdir()
    frame = pl.DataFrame({
        "task_id": ["a", "b", "c", "d", "e"],
        "attempt": [0, 1, 2, 3, 4],
        "reply": ["fine", "call +44 20 7946 0958", None, "fine", "call +44 20 7946 0958"],
        "tags": [["x"], [], ["mail laura.chen@brightleaf.io"], None, ["y"]],
        "meta": [{"ip": "10.0.0.0/8"}, {"ip": "10.1.2.3"}, {"ip": None}, {"ip": "ja***@g***.com"}, {"ip": "x"}],
    })
    frame.write_parquet(run / "x.parquet", row_group_size=2)
    result = _audit(str(workspace), "--json")
    assert result.exit_code == 1
    assert [(h["file"], h["line"], h["column"], h["kind"]) for h in json.loads(result.stdout)] == [
        ("reports/r/x.parquet", 2, "reply", "phone"), ("reports/r/x.parquet", 5, "reply", "phone"),
        ("reports/r/x.parquet", 3, "tags", "email"), ("reports/r/x.parquet", 2, "meta", "ip")]
    assert "reports/r/x.parquet:2 [reply]: phone +4***" in _audit(str(workspace)).stdout
    assert "7946" not in result.output
    # batches smaller than the file keep the row numbers of the whole file
    assert [(h.line, h.column) for h in _scan_parquet(run / "x.parquet", batch=2)] == [
        (2, "reply"), (2, "meta"), (3, "tags"), (5, "reply")]


def test_a_value_folded_over_two_yaml_lines_is_found(tmp_path):
    workspace = _workspace(tmp_path)
    path = workspace / "tool_mocks" / "T-planted.yaml"
    path.write_text("interactions:\n- response:\n    body:\n      string: 'reach the owner on +44 20\n"
                    "        7946 0958 tomorrow'\n", encoding="utf-8")  # as yaml.dump folds a long scalar
    assert yaml.safe_load(path.read_text())["interactions"][0]["response"]["body"]["string"].endswith(
        "+44 20 7946 0958 tomorrow")
    result = _audit(str(workspace))
    assert result.exit_code == 1
    assert result.stdout == "tool_mocks/T-planted.yaml:4: phone +4***\n"
    path.write_text("not: [valid yaml\nlaura.chen@brightleaf.io\n")  # unparsable: read line by line
    assert _audit(str(workspace)).stdout == "tool_mocks/T-planted.yaml:2: email la***\n"


def test_html_and_svg_drawing_data_is_not_read_but_text_is(tmp_path):
    workspace = _workspace(tmp_path)
    run = workspace / "reports" / "r"
    run.mkdir()
    (run / "chart.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 415 5550199">\n'
        '<path d="M 4155550199 13912345678 L 10.1.2.3 1.2.3.4"/>\n'
        '<image href="data:image/png;base64,AKIAIOSFODNN7EXAMPLE0"/>\n'
        '<text x="13912345678">ok</text></svg>\n')
    (run / "report.html").write_text(
        "<html><style>.a{width:13912345678px}</style>\n<body><p>Contact\n"
        "<a href=\"mailto:laura.chen&#64;brightleaf.io\">us</a></p></body></html>\n")
    result = _audit(str(workspace))
    assert result.exit_code == 1
    assert result.stdout == "reports/r/report.html:3: email la***\n"


def test_usage_errors_exit_2(tmp_path):
    result = _audit(str(tmp_path / "missing"))
    assert result.exit_code == 2 and "not a folder" in result.stderr
    (tmp_path / "empty").mkdir()
    result = _audit(str(tmp_path / "empty"))
    assert result.exit_code == 2 and "not a Cirrus workspace" in result.stderr
    assert _audit().exit_code == 2  # no WORKSPACE argument


def test_an_unreadable_file_is_not_clean(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "reports" / "r").mkdir()
    (workspace / "reports" / "r" / "tasks.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    result = _audit(str(workspace))
    assert result.exit_code == 2
    assert "could not read reports/r/tasks.parquet" in result.stderr
    _plant(workspace, "laura.chen@brightleaf.io")
    assert _audit(str(workspace)).exit_code == 1  # a hit outranks the read error
    assert audit(workspace).unreadable[0].startswith("reports/r/tasks.parquet: ")


def test_a_workspace_with_evaluation_reports_is_clean(sample_runs_copy):
    from cirrus.cli import app

    workspace = sample_runs_copy
    shutil.copy(REPO / ".cirrus-audit-allow", workspace / ".cirrus-audit-allow")
    report = CliRunner().invoke(app, ["report", "oracle", "retrieval", "-w", str(workspace), "--bootstrap", "50"])
    assert report.exit_code == 0, report.output
    written = {p.suffix for p in (workspace / "reports").rglob("*") if p.is_file()}
    assert {".parquet", ".jsonl", ".json", ".html"} <= written
    result = _audit(str(workspace))
    assert result.exit_code == 0, result.output
    assert "binary skipped" not in result.stderr  # Parquet is read, not skipped


def test_a_masked_ipv4_mapped_address_is_no_hit_and_a_real_one_is():
    from cirrus.audit import scan_text

    assert scan_text("peer ::ffff:47.***.***.*** closed") == []
    assert [h.value for h in scan_text("peer ::ffff:47.98.12.3 closed")] == ["::ffff:47.98.12.3"]


@pytest.mark.parametrize("text", [
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AccessKeySecret: 4rjkdfKJ83kdfjLKJ38djfkLKJ3k2d",
    "token ya29.a0AfH6SMBx3exampletoken_value-x9", "my password: hunter2", "the pwd is Sup3r-S3cret!",
    '{"password": "hunter2"}', "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7xq9Zf2\n-----END RSA PRIVATE KEY-----",
    "GET /v2/items?api_key=k9f8e7d6c5b4a3&page=2",
])
def test_the_ingest_secret_classes_are_audit_hits(text):
    from cirrus.audit import scan_text

    assert [h for h in scan_text(text) if h.kind in ("secret", "key")], text


@pytest.mark.parametrize("text", ['"input_tokens": 2264', "max_tokens=2048", "the token is expired",
                                  "password: ******** (masked)", "token: 1234567890123456"])
def test_counters_words_and_masked_secrets_are_not_audit_hits(text):
    from cirrus.audit import scan_text

    assert scan_text(text) == [], text


def test_the_model_response_cache_is_read_too(tmp_path):
    """A judge's cached answer quoting an unmasked e-mail is a hit, located
    by the cache file and its row (issue 26 item 6); a clean cache is clean."""
    from cirrus.audit import audit as run_audit
    from cirrus.llm.cache import ResponseCache

    (tmp_path / "tickets").mkdir()
    cache = ResponseCache(tmp_path / ".cirrus-cache")
    cache.put(ResponseCache.key("http://127.0.0.1:9/v1", '{"q": 1}'),
              {"content": '{"verdict": "Included", "reason": "it names olivia.hartmann@gmail.com"}'})
    cache.put(ResponseCache.key("http://127.0.0.1:9/v1", '{"q": 2}'), {"content": "Yes"})
    cache.close()
    result = run_audit(tmp_path)
    assert [(h.kind, h.value, h.file) for h in result.hits] == [
        ("email", "olivia.hartmann@gmail.com", ".cirrus-cache/llm-cache.sqlite3")]
    assert result.exit_code == 1
