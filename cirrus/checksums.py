"""Check digits shared by de-identification and the audit."""

from __future__ import annotations


def luhn(digits: str) -> bool:
    """The Luhn checksum of a string of digits holds (payment card numbers)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0
