"""The names the report shows for its metrics and task dimensions (page
headers, chart axes, terminal lines)."""

from __future__ import annotations

__all__ = ["METRIC_TITLES", "SUBTASK_METRIC_TITLES", "TASK_DIMENSION_TITLES"]

TASK_DIMENSION_TITLES = {
    "category": "Service category",
    "checkpoints": "Checkpoints per task (K)",
    "input_tokens": "Task input tokens",
    "tools": "Reference uses tools",
    "language": "Ticket language",
    "channel": "Ticket channel",
}
METRIC_TITLES = {
    "sr_pass1": "SR pass@1", "sr_pass_at_k": "SR pass@K", "pass_hat_k": "pass^K", "atpr": "ATPR",
    "alj": "ALJ", "anei": "ANEI", "amtl": "AMTL", "acceptance_rate": "Acceptance rate",
    "coverage_rate": "Coverage rate (TPR)", "reach_rate": "Reach rate", "tia": "TIA", "tsa": "TSA", "tev": "TEV",
    "rr": "RR",
}
# the columns of the subtask tables (cirrus.report.subtask): Table 4 and Figure 6
SUBTASK_METRIC_TITLES = {"pass_at_1": "pass@1", "pass_at_k": "pass@K", "tia": "TIA", "tia_tool": "TIA (tool)",
                         "tsa": "TSA", "tev": "TEV", "rr": "RR", "amtl": "AMTL"}
