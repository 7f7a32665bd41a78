"""``cirrus audit`` finds every class of issue 26 planted back into a clean
workspace (issue 26 item 6: one engine for the audit, everywhere).

A copy of the committed sample workspace gets one instance of each class
(several forms for some): secrets, national and personal identifiers, device
and financial identifiers, the same values disguised, names in non-Latin
scripts next to a name cue, and addresses.  Each lands in a different file of
the workspace -- a task's reply in ``tasks.jsonl``, a cassette's response
body, a knowledge article, a report as JSON, HTML and Parquet, and the model
response cache -- and the audit (the library function and the command,
without ``--raw``) must find each, by its file (and line) and kind.  Masked
forms of the same values, and the clean sample workspaces, are no hits."""

from __future__ import annotations

import html
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
import typer
import yaml
from typer.testing import CliRunner

from cirrus.audit import audit, scan_text
from cirrus.commands.audit import audit as audit_command
from tests.conftest import REPO
from tests.test_deid_secret_formats import SECRETS as SECRET_FORMS

ZWSP = "\u200b"


def _full_width(text: str) -> str:
    """``text`` with ASCII letters, digits and symbols in their full-width forms."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else ("\u3000" if c == " " else c) for c in text)


@dataclass(frozen=True)
class Plant:
    name: str  # the class (and form)
    text: str  # what is written into the workspace
    kind: str  # the audit's kind for it
    where: str  # tasks | cassette | kb | json | html | parquet | cache


_SECRETS = ["twilio_sk", "twilio_auth", "shopify_pat", "digitalocean_pat", "azure_service_bus", "cookie_php",
            "cookie_java", "putty", "pgp", "sshpass", "mysql", "password_flag", "curl_user", "api_key_space",
            "passwort", "contrasena", "parol", "password_ja"]

CLASSES: list[tuple[str, str, str]] = [  # (name, text, kind)
    *((f"secret-{k}", SECRET_FORMS[k][0], "secret") for k in _SECRETS),
    # national and personal identifiers
    ("de-tax-id", "Meine Steuer-ID 36574261809 steht auf dem Bescheid.", "national_id"),
    ("in-pan", "my PAN is ABCPE1234F for the invoice", "national_id"),
    ("uk-nino", "National insurance number: AB 12 34 56 C", "national_id"),
    ("es-dni", "Spanish DNI 12345678Z on the form", "national_id"),
    ("it-codice-fiscale", "codice fiscale RSSMRA85T10A562S", "national_id"),
    ("fr-nir", "NIR: 2 95 10 99 126 111 93", "national_id"),
    ("us-driver-licence", "my driver's license number is D1234567 (California)", "national_id"),
    ("us-driver-licence-dl", "DL# F255-921-50-094 expires next year", "national_id"),
    ("dob-words", "I was born on 3 March 1984 in Oslo", "birth_date"),
    ("dob-iso", "DOB: 1990-04-12, please verify", "birth_date"),
    # device and financial identifiers
    ("vin", "the car 1M8GDM9AXKP042788 makes a noise", "device_id"),
    ("mac", "router MAC 00:1A:2B:3C:4D:5E dropped", "device_id"),
    ("imei", "my IMEI is 49-015420-323751-8", "device_id"),
    ("iban-de", "IBAN DE89 3704 0044 0532 0130 00 for the refund", "iban"),
    ("iban-gb", "pay to GB82 WEST 1234 5698 7654 32 please", "iban"),
    ("iban-fr", "RIB: FR14 2004 1010 0505 0001 3M02 606", "iban"),
    ("iban-es", "cuenta ES9121000418450200051332", "iban"),
    ("iban-nl", "rekening NL91ABNA0417164300", "iban"),
    ("iban-no", "konto NO93 8601 1117 947", "iban"),
    ("card-full-width", "card " + _full_width("4111 1111 1111 1111"), "card"),
    ("card-full-width-run", "卡号" + _full_width("5500000000000004"), "card"),
    ("cvv-text", "the security code on the back is 737", "card"),
    ("cvv-field", "CVV: 4821", "card"),
    # the same values disguised
    ("email-zero-width", f"write to laura.chen{ZWSP}@bright{ZWSP}leaf.io", "email"),
    ("phone-url-encoded", "https://x.invalid/cb?to=%2B1%20415%20555%200199", "phone"),
    ("email-full-width", "mail " + _full_width("laura.chen@brightleaf.io"), "email"),
    ("iban-zero-width", f"IBAN DE89{ZWSP}3704{ZWSP}0044{ZWSP}0532{ZWSP}0130{ZWSP}00", "iban"),
    ("card-url-encoded", "pay?card=4111%201111%201111%201111", "card"),
    # names in non-Latin scripts next to a name cue
    ("name-cyrillic", "Hi, my name is Иван Петров and my order is late", "name"),
    ("name-greek", "Dear Αλέξανδρος, thanks for the update", "name"),
    ("name-arabic", "Thanks, محمد العلي", "name"),
    ("name-hangul", "This is 김민준 from the Seoul office", "name"),
    ("name-devanagari", "Best,\nराहुल शर्मा", "name"),
    ("name-japanese", "田中と申します", "name"),
    # addresses
    ("uk-postcode", "the postcode is SW1A 1AA", "address"),
    ("irish-eircode", "my Eircode is D02 X285", "address"),
    ("street-line", "please send it to 57 Holloway Mews, London", "address"),
    ("po-box", "send to PO Box 4411, Reno", "address"),
]

# a value split over array elements or sibling fields: written as JSON structure
SPLIT = [
    ("card-split-array", {"card": ["4111 1111", "1111 1111"]}, "card"),
    ("card-split-fields", {"payment": {"card_part1": "5500 0000", "card_part2": "0000 0004"}}, "card"),
    ("iban-split-array", {"iban": ["DE89 3704 0044", "0532 0130 00"]}, "iban"),
]

LOCATIONS = ("tasks", "cassette", "json", "html", "parquet", "cache", "kb")
PLANTS = [Plant(name, text, kind, LOCATIONS[i % len(LOCATIONS)]) for i, (name, text, kind) in enumerate(CLASSES)]


def _workspace(tmp_path: Path) -> Path:
    """A copy of the committed sample workspace (as tests/test_audit.py makes it)."""
    workspace = tmp_path / "ws"
    shutil.copytree(REPO / "tickets", workspace / "tickets")
    shutil.copytree(REPO / "tool_mocks", workspace / "tool_mocks")
    (workspace / "reports").mkdir()
    for path in (REPO / "reports").iterdir():
        if path.is_file():
            shutil.copy(path, workspace / "reports" / path.name)
    shutil.copy(REPO / ".cirrus-audit-allow", workspace / ".cirrus-audit-allow")
    return workspace


def _cassette_body(path: Path, change) -> None:
    """``change`` applied to the JSON of the first response body of a cassette."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    body = data["interactions"][0]["response"]["body"]
    content = json.loads(body["string"])
    change(content)
    body["string"] = json.dumps(content, ensure_ascii=False)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def _plant_all(workspace: Path) -> dict[str, tuple[str, int | None, str]]:
    """Every plant written into ``workspace``; {name: (file, line or None, kind)}."""
    from cirrus.llm.cache import ResponseCache

    tasks_path = workspace / "tickets" / "tasks.jsonl"
    tasks = tasks_path.read_text(encoding="utf-8").splitlines()
    cassettes = sorted((workspace / "tool_mocks").glob("*.yaml"))
    planted: dict[str, tuple[str, int | None, str]] = {}
    counters = dict.fromkeys(LOCATIONS, 0)
    reports = workspace / "reports" / "planted"
    reports.mkdir(parents=True)
    for plant in PLANTS:
        n = counters[plant.where]
        counters[plant.where] += 1
        if plant.where == "tasks":
            task = json.loads(tasks[n])
            task["checkpoints"][0]["reply"] += " " + plant.text
            tasks[n] = json.dumps(task, ensure_ascii=False)
            planted[plant.name] = ("tickets/tasks.jsonl", n + 1, plant.kind)
        elif plant.where == "cassette":
            _cassette_body(cassettes[n], lambda content, text=plant.text: content.update(note=text))
            planted[plant.name] = (cassettes[n].relative_to(workspace).as_posix(), None, plant.kind)
        elif plant.where == "kb":
            path = workspace / "tickets" / "kb" / f"kb-planted-{plant.name}.md"
            path.write_text(f"# A note\n\nSome text.\n{plant.text}\n", encoding="utf-8")
            planted[plant.name] = (path.relative_to(workspace).as_posix(), 4 if "\n" not in plant.text else None,
                                   plant.kind)
        elif plant.where == "json":
            path = reports / f"{plant.name}.json"
            path.write_text(json.dumps({"run": "r1", "reply": plant.text}, ensure_ascii=False), encoding="utf-8")
            planted[plant.name] = (path.relative_to(workspace).as_posix(), 1, plant.kind)
        elif plant.where == "html":
            path = reports / f"{plant.name}.html"
            path.write_text(f"<html><body><h1>Run</h1>\n<p>{html.escape(plant.text)}</p></body></html>\n",
                            encoding="utf-8")
            planted[plant.name] = (path.relative_to(workspace).as_posix(), None, plant.kind)
        elif plant.where == "parquet":
            path = reports / f"{plant.name}.parquet"
            pl.DataFrame({"task_id": ["NC-1", "NC-2"], "reply": ["All fine.", plant.text],
                          "score": [1.0, 0.5]}).write_parquet(path)
            planted[plant.name] = (path.relative_to(workspace).as_posix(), 2, plant.kind)
        else:  # the model response cache: a judge's answer quoting what it judged
            cache = ResponseCache(workspace / ".cirrus-cache" / plant.name)
            cache.put(ResponseCache.key("http://127.0.0.1:9/v1", json.dumps({"q": plant.name})),
                      {"content": json.dumps({"verdict": "Included", "reason": f"the reply says: {plant.text}"},
                                             ensure_ascii=False)})
            cache.close()
            planted[plant.name] = (f".cirrus-cache/{plant.name}/llm-cache.sqlite3", None, plant.kind)
    # values split over array elements or sibling fields: a report JSON, a cassette body, a task's tool result
    for index, (name, content, kind) in enumerate(SPLIT):
        if index == 0:
            path = reports / f"{name}.json"
            path.write_text(json.dumps({"run": "r1", "tool_result": content}), encoding="utf-8")
            planted[name] = (path.relative_to(workspace).as_posix(), 1, kind)
        elif index == 1:
            cassette = cassettes[counters["cassette"]]
            _cassette_body(cassette, lambda body, content=content: body.update(content))
            planted[name] = (cassette.relative_to(workspace).as_posix(), None, kind)
        else:
            n = counters["tasks"]
            task = json.loads(tasks[n])
            task["history"].append({"role": "tool_result", "call_id": "c9", "content": content})
            tasks[n] = json.dumps(task, ensure_ascii=False)
            planted[name] = ("tickets/tasks.jsonl", n + 1, kind)
    tasks_path.write_text("\n".join(tasks) + "\n", encoding="utf-8")
    return planted


@pytest.fixture(scope="module")
def planted_workspace(tmp_path_factory) -> tuple[Path, dict[str, tuple[str, int | None, str]]]:
    workspace = _workspace(tmp_path_factory.mktemp("classes"))
    return workspace, _plant_all(workspace)


@pytest.fixture(scope="module")
def result(planted_workspace):
    return audit(planted_workspace[0])


def _missed(result, planted) -> list[str]:
    found = {(h.file, h.line, h.kind) for h in result.hits} | {(h.file, None, h.kind) for h in result.hits}
    return [name for name, (file, line, kind) in planted.items() if (file, line, kind) not in found]


def test_every_class_planted_back_is_found(planted_workspace, result):
    _, planted = planted_workspace
    assert len(planted) == len(CLASSES) + len(SPLIT)
    missed = _missed(result, planted)
    assert not missed, f"{len(missed)} of {len(planted)} classes missed: {missed}"


def test_nothing_else_is_found(planted_workspace, result):
    """Every hit is in a file (and line) that was planted: the rest of the
    sample workspace stays clean with the engine's recognizers on it."""
    _, planted = planted_workspace
    places = {(f, line) for f, line, _ in planted.values()}
    stray = [str(h) for h in result.hits if (h.file, h.line) not in places and (h.file, None) not in places]
    assert not stray


def test_the_command_finds_every_class_and_prints_none(planted_workspace):
    workspace, planted = planted_workspace
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test host."""

    app.command("audit")(audit_command)
    run = CliRunner().invoke(app, ["audit", str(workspace), "--json"])
    assert run.exit_code == 1, run.output
    hits = json.loads(run.stdout)
    found = {(h["file"], h["kind"]) for h in hits}
    assert not [name for name, (file, _, kind) in planted.items() if (file, kind) not in found]
    assert all(h["masked"].endswith("***") and len(h["masked"]) == 5 for h in hits)
    for name, text, _ in CLASSES:
        for word in text.split():
            if sum(c.isdigit() for c in word) >= 6 or "@" in word:
                assert word.strip(".,:()") not in run.output, name


@pytest.mark.parametrize("text", [
    # what the ingest writes for these values: masked with * (format-shaped) or a placeholder
    "Meine Steuer-ID 365******09 steht", "my PAN is AB******F", "National insurance number: AB ** ** ** C",
    "Spanish DNI 1*******Z", "codice fiscale RS************2S", "NIR: 2 ** ** ** *** *** 93",
    "I was born on 3 ***** 1984", "DOB: 19**-**-**", "the car 1M*************88", "router MAC 00:**:**:**:**:5E",
    "my IMEI is 49-******-******-8", "IBAN DE89 **** **** **** **** 00", "IBAN DE** **** **** **** **** **",
    "card **** **** **** 1111", "CVV: ***", "the security code is ***", "Hi, my name is Ив** Пе*****",
    "Dear Αλ********,", "the postcode is SW** ***", "please send it to ** Ho****** Me**, London",
    "send to PO Box ****, Reno", "my driver's license number is D1******", "<NATIONAL_ID_1>", "<IBAN_CODE_2>",
    "la***@b***.io",
])
def test_masked_forms_are_no_hits(text):
    assert scan_text(text) == [], [(h.kind, h.masked) for h in scan_text(text)]


@pytest.mark.parametrize("text", [
    "the release of 2024-03-01 fixed it", "order 12345678901234567 is late", "build 20240501120000123",
    "resize the partition: start=2048 end=209715167", "Ошибка подключения на сервере",
    "Здравствуйте, у меня проблема с заказом", "2 items left, gate 4",
    "Room 12 Main Building",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "HTTP/1.1 200 OK",
    "error code E1234567 (see docs)", "ECS instance i-bp1abcdef", "the code is 404", "license key expires 2025-12-31",
    "mac 00:00:00:00:00:00", "version 10.0.19045.3693", "retry in 737 ms",
])
def test_ordinary_support_text_is_no_hit(text):
    assert scan_text(text) == [], [(h.kind, h.masked) for h in scan_text(text)]


@pytest.mark.parametrize("folder", [".", "samples/zh"])
def test_the_committed_sample_workspaces_stay_clean(folder, tmp_path):
    """The committed workspaces (copies: no local runs or caches), English and Chinese."""
    if folder == ".":
        workspace = _workspace(tmp_path)
    else:
        workspace = tmp_path / "zh"
        shutil.copytree(REPO / folder, workspace)
    result = audit(workspace)
    assert result.scanned and not result.unreadable
    assert [str(h) for h in result.hits] == []
