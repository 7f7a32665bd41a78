"""The workspace's domain in every prompt (issue 24, item 1): no prompt names a
business the workspace did not declare; a `[domain]` of the pipeline reaches
the annotator and the manifest, one of cirrus.toml (or the manifest's) the
agent and the judges, and the description is in their fingerprints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.agents.prompts import SYSTEM_PROMPT, agent_system_prompt
from cirrus.cli import app
from cirrus.config import load_pipeline
from cirrus.domain import Domain, manifest_domain, with_domain
from cirrus.ingest.annotate import llm as annotator_llm
from cirrus.ingest.annotate import select_llm
from cirrus.judges import prompts as judge_prompts
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY = "sk-cirrus-domain-0123456789abcdef"
SHOP = Domain("an online home-appliance shop: orders, delivery, installation and repairs", "家电网店：订单、配送、安装、维修")
# words that give a business away: the cloud provider the first prompts assumed, and its products
DOMAIN_WORDS = re.compile(r"cloud|compute instance|AccessKey|console path|\bECS\b|storage|networking|云", re.I)


def test_no_default_prompt_names_a_domain():
    neutral = {
        "agent": SYSTEM_PROMPT, "coverage": judge_prompts.COVERAGE_SYSTEM,
        "coverage_later": judge_prompts.COVERAGE_LATER_SYSTEM, "fluency": judge_prompts.FLUENCY_SYSTEM,
        "annotator": annotator_llm.SYSTEM_PROMPT, "selector": select_llm.SYSTEM_PROMPT,
    }
    for name, prompt in neutral.items():
        assert not DOMAIN_WORDS.search(prompt), (name, DOMAIN_WORDS.search(prompt))
    assert SYSTEM_PROMPT == agent_system_prompt() == agent_system_prompt(Domain())
    assert judge_prompts.COVERAGE_SYSTEM == judge_prompts.coverage_system(Domain())


def test_a_described_domain_enters_every_prompt_in_both_languages():
    for prompt in (agent_system_prompt(SHOP), judge_prompts.coverage_system(SHOP),
                   judge_prompts.coverage_later_system(SHOP), judge_prompts.fluency_system(SHOP),
                   with_domain(annotator_llm.SYSTEM_PROMPT, SHOP)):
        assert "home-appliance shop" in prompt and "家电网店" in prompt
    assert Domain("a bank").text() == "a bank" and Domain("", "一家银行").text() == "一家银行"
    assert Domain(" a   bank\n").description == "a bank"  # one line
    with pytest.raises(ValueError, match="keep it under 500"):
        Domain("x" * 501)
    # the fluency prompt is a format template: its JSON example keeps its braces
    assert '{"reason": "<one or two sentences>", "answer": "Yes" or "No"}' in judge_prompts.fluency_system(SHOP)


def test_pipeline_domain_reaches_the_manifest_and_the_hash(tmp_path):
    pipeline = load_pipeline()
    assert pipeline.domain.value() == Domain()
    shop = pipeline.model_copy(update={"domain": type(pipeline.domain)(description=SHOP.description)})
    assert shop.config_hash() != pipeline.config_hash()  # the annotator's prompt changes with it
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "t.json").write_text(json.dumps({"ticket_id": "T-1", "events": [
        {"role": "customer", "text": "My fridge arrived dented, order 4411. What now?"},
        {"role": "agent", "text": "Sorry about that. Please send a photo of the dent and we will arrange a swap."}]}))
    toml = tmp_path / "shop.toml"
    base = (Path(__file__).parents[1] / "pipelines/default.toml").read_text(encoding="utf-8")
    toml.write_text(base + f'\n[domain]\ndescription = "{SHOP.description}"\ndescription_zh = "{SHOP.description_zh}"\n',
                    encoding="utf-8")
    ws = tmp_path / "ws"
    result = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(ws), "--pipeline", str(toml), "-q"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((ws / "tickets/manifest.json").read_text(encoding="utf-8"))
    assert manifest["domain"] == {"description": SHOP.description, "description_zh": SHOP.description_zh}
    assert manifest_domain(ws) == SHOP
    plain = tmp_path / "plain"
    result = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(plain), "-q"])
    assert result.exit_code == 0, result.output
    assert "domain" not in json.loads((plain / "tickets/manifest.json").read_text(encoding="utf-8"))
    assert manifest_domain(plain) == Domain()


def rule(body: dict) -> Reply | str:
    answer = judge_or_fluency(body)
    return answer if answer is not None else agent_reply("perfect", body)


def _run(ws: Path, server: ChatServer, run_id: str) -> CliRunner:
    result = CliRunner().invoke(app, [
        "eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", "DOMAIN_KEY",
        "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", run_id, "-w", str(ws), "-q"],
        env={"DOMAIN_KEY": KEY})
    assert result.exit_code == 0, result.output
    return result


def _systems(requests: list[dict], model: str) -> set[str]:
    return {r["messages"][0]["content"] for r in requests if r["model"] == model and "customer question" in json.dumps(
        r["messages"])}


def test_the_agent_and_judges_are_told_the_workspace_domain(tmp_path):
    ws = write_workspace(tmp_path, [make_task("T-tool", True)])
    with ChatServer(rule=rule) as server:
        _run(ws, server, "neutral")
        neutral = list(server.requests)
        # the manifest's domain (as ingest writes it from the pipeline's [domain])
        (ws / "tickets/manifest.json").write_text(json.dumps({"domain": {"description": "a bank"}}))
        _run(ws, server, "manifest")
        from_manifest = server.requests[len(neutral):]
        # cirrus.toml's [domain] wins over the manifest's
        (ws / "cirrus.toml").write_text(f'[domain]\ndescription = "{SHOP.description}"\n'
                                        f'description_zh = "{SHOP.description_zh}"\n', encoding="utf-8")
        _run(ws, server, "toml")
        from_toml = server.requests[len(neutral) + len(from_manifest):]
    for model in ("agent", "judge", "fluency"):
        assert not any(DOMAIN_WORDS.search(s) or "bank" in s for s in _systems(neutral, model)), model
        assert all("a bank" in s for s in _systems(from_manifest, model)) and _systems(from_manifest, model), model
        assert all("home-appliance" in s and "家电网店" in s and "bank" not in s
                   for s in _systems(from_toml, model)) and _systems(from_toml, model), model
    runs = {run: json.loads((ws / f"reports/{run}/run.json").read_text()) for run in ("neutral", "manifest", "toml")}
    # run.json records what the prompts were told (nothing for a workspace that says nothing)
    assert "domain" not in runs["neutral"] and runs["manifest"]["domain"] == {"description": "a bank"}
    assert runs["toml"]["domain"] == {"description": SHOP.description, "description_zh": SHOP.description_zh}
    hashes = {run: (data["fingerprint"]["agent_role"]["prompt_sha256"],
                    data["fingerprint"]["judge_role"]["prompt_sha256"],
                    data["fingerprint"]["fluency_role"]["prompt_sha256"]) for run, data in runs.items()}
    # the description is part of every prompt hash: the three runs are told apart
    assert len({h[0] for h in hashes.values()}) == len({h[1] for h in hashes.values()}) == 3
    assert len({h[2] for h in hashes.values()}) == 3
