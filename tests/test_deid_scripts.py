"""Names in any script (issue 26 item 4): a name in Cyrillic, Greek,
Arabic, Hebrew, Devanagari, Hangul or Japanese next to a name cue, a
greeting or a signature is masked; a sentence in that script without a cue
is not a name."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("text, name", [
    ("Hi, my name is Иван Петров and my order is late", "Иван Петров"),
    ("Regards,\nНаталья Смирнова", "Наталья Смирнова"),
    ("Dear Αλέξανδρος, thanks for the update", "Αλέξανδρος"),
    ("Thanks, محمد العلي", "محمد العلي"),
    ("This is 김민준 from the Seoul office", "김민준"),
    ("Best,\nराहुल शर्मा", "राहुल शर्मा"),
    ("меня зовут Ольга", "Ольга"),
    ("Привет, Ольга! Заказ пришёл?", "Ольга"),
    ("田中と申します", "田中"),
])
def test_names_after_a_cue_are_found(deidentifier, text, name):
    found = [text[sp.start:sp.end] for sp in deidentifier.detect(text) if sp.entity == "PERSON"]
    assert name in found, found


@pytest.mark.parametrize("text", [
    "The error says Ошибка подключения",
    "Здравствуйте, у меня проблема с заказом",
    "Customer wrote: Спасибо за помощь",
])
def test_text_in_another_script_without_a_name_stays(deidentifier, text):
    found = [text[sp.start:sp.end] for sp in deidentifier.detect(text) if sp.entity == "PERSON"]
    assert not [f for f in found if not f.isascii()], found
