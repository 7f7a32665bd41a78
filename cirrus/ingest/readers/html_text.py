"""HTML message bodies as plain text, for the helpdesk export readers.

Helpdesks store replies as HTML (Intercom's ``body``, Freshdesk's ``body``,
Zendesk's ``html_body``, Salesforce's ``HtmlBody``).  The text an agent or a
customer read is what matters here: block elements become line breaks,
entities are decoded, ``script``/``style`` disappear, and quoted earlier
mail (``<blockquote>``, the quote blocks Gmail, Outlook and Freshdesk add)
is left out, because the same words are already an earlier event of the
ticket.  Only the standard library's ``html.parser`` is used: it never
fails on broken markup, it just reads what it can.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["html_to_text", "looks_like_html"]

_BLOCKS = frozenset({
    "address", "article", "aside", "dd", "div", "dl", "dt", "figcaption", "figure", "footer", "form", "h1", "h2",
    "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "tbody",
    "td", "tfoot", "th", "thead", "tr", "ul",
})
_DROPPED = frozenset({"script", "style", "head", "title", "template", "noscript"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})
# Class names mail clients and helpdesks give to the quoted earlier message.
_QUOTE_CLASSES = ("gmail_quote", "freshdesk_quote", "moz-cite-prefix", "yahoo_quoted", "zd-quote")
_HTML_HINT = re.compile(r"<(?:/?(?:p|br|div|span|a|b|i|u|em|strong|ul|ol|li|img|table|tr|td|h[1-6]|blockquote|font)\b"
                        r"[^>]*>|!--)", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\f\v\u00a0\u2000-\u200a\u3000]+")
_NEWLINES = re.compile(r"\n{3,}")
# Markers for the edges of block elements, resolved once the text is read:
# a run of edges is one line break, or a blank line when a paragraph (or a
# heading, a table) is among them, so "<div>a</div><div>b</div>" is two
# lines and "<p>a</p><p>b</p>" two paragraphs.
_LINE, _PARAGRAPH = "\ue000", "\ue001"
_PARAGRAPHS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "pre", "hr"})
_EDGES = re.compile(f"[{_LINE}{_PARAGRAPH}](?:[ \\t]*[{_LINE}{_PARAGRAPH}])*")


def looks_like_html(text: str) -> bool:
    """Whether ``text`` carries common HTML tags (a chat message that may be
    plain text or rich text, depending on the client that sent it)."""
    return bool(_HTML_HINT.search(text))


def html_to_text(html: str) -> str:
    """The readable text of an HTML fragment: paragraphs and line breaks as
    newlines, list items on their own lines, runs of spaces collapsed, at most
    one blank line in a row, surrounding whitespace stripped."""
    reader = _TextReader()
    reader.feed(html.replace(_LINE, "").replace(_PARAGRAPH, ""))
    reader.close()
    text = _EDGES.sub(lambda run: "\n\n" if _PARAGRAPH in run.group() else "\n", "".join(reader.parts))
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _NEWLINES.sub("\n\n", "\n".join(lines)).strip()


class _TextReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip: list[str] = []  # open elements whose content is left out

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag not in _VOID:
                self._skip.append(tag)
            return
        classes = " ".join(value or "" for name, value in attrs if name == "class")
        if tag in _DROPPED or tag == "blockquote" or any(name in classes for name in _QUOTE_CLASSES):
            if tag not in _VOID:
                self._skip.append(tag)
            return
        if tag == "br":
            self.parts.append("\n")
        elif tag == "li":
            self.parts.append(_LINE + "- ")
        elif tag in _BLOCKS:
            self.parts.append(_PARAGRAPH if tag in _PARAGRAPHS else _LINE)
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self.parts.append(f"[{alt}]")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self.handle_starttag(tag, attrs)
        else:  # <div/>: opened and closed at once
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            # close up to the matching element (tolerates unclosed inner tags)
            if tag in self._skip:
                while self._skip and self._skip.pop() != tag:
                    pass
            return
        if tag in _BLOCKS:
            self.parts.append(_PARAGRAPH if tag in _PARAGRAPHS else _LINE)

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data.replace("\r", "").replace("\n", " "))
