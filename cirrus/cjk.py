"""Character classes of Chinese text, one definition for every stage that
treats it differently (language detection, de-identification, masks,
denoising, retrieval, the offline judge)."""

from __future__ import annotations

import re

# CJK Unified Ideographs, Extension A, compatibility ideographs, Extensions B-G
HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef\U00030000-\U0003134f"
# CJK symbols and punctuation, full-width forms
CJK_PUNCT_RANGES = "\u3000-\u303f\uff00-\uffef"
HAN = re.compile(f"[{HAN_RANGES}]")
HAN_RUN = re.compile(f"([{HAN_RANGES}]+)")


def has_han(text: str) -> bool:
    return HAN.search(text) is not None
