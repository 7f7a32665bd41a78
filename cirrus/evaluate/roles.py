"""Build the agent, judge and fluency checker of a run from command-line
options (contract section 3): ``baseline:*`` agents and ``local`` judges run
offline; any other name is a model on an OpenAI-compatible endpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrus.agents.baselines import OracleAgent, RetrievalAgent
from cirrus.evaluate.types import Agent, CoverageJudge, FluencyChecker
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker

BASELINES = ("baseline:oracle", "baseline:retrieval")
LOCAL = "local"


class RoleError(ValueError):
    pass


@dataclass
class Roles:
    agent: Agent
    judge: CoverageJudge
    fluency: FluencyChecker
    fingerprint: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def build_roles(*, model: str, base_url: str | None, api_key_env: str | None, judge_model: str,
                judge_base_url: str | None, fluency_model: str | None, fluency_base_url: str | None,
                tasks: list[dict[str, Any]], workspace: Path) -> Roles:
    fluency_model = fluency_model or judge_model
    if model == "baseline:oracle":
        agent: Agent = OracleAgent()
    elif model == "baseline:retrieval":
        agent = RetrievalAgent(tasks)
    elif model.startswith("baseline:"):
        raise RoleError(f"unknown baseline {model!r}; choose one of {', '.join(BASELINES)}")
    else:
        raise RoleError(f"model agents are not wired in this build yet; use one of {', '.join(BASELINES)}")
    judge: CoverageJudge
    fluency: FluencyChecker
    if judge_model != LOCAL or fluency_model != LOCAL:
        raise RoleError("LLM judges are not wired in this build yet; use --judge-model local")
    judge, fluency = LocalCoverageJudge(), LocalFluencyChecker()
    fingerprint = {"agent_model": model, "judge_model": judge_model, "fluency_model": fluency_model,
                   "judge_thresholds": [judge.key_threshold, judge.word_threshold]}
    details = {"agent_base_url": base_url, "judge_base_url": judge_base_url, "fluency_base_url": fluency_base_url}
    return Roles(agent, judge, fluency, fingerprint, details)
