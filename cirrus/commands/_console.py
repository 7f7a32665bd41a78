"""The rich consoles of the command line: ids and paths stay whole when the
output is piped (see :class:`CliConsole`)."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleDimensions, Group
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 1000  # the width of output that is not a terminal, unless COLUMNS says otherwise


class CliConsole(Console):
    """A rich console for the command line's output that keeps run ids,
    task ids and paths whole when the output is not a terminal.

    * Piped, redirected or captured output is :data:`PIPE_WIDTH` columns wide
      (``COLUMNS`` when set), not rich's 80, so tables are not wrapped and a
      line can be grepped; a terminal keeps its own width.
    * A table is at least as wide as its title and caption (clamped to the
      console's width), so that a title holding a run id is not folded at
      the width of a narrow table.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # rich freezes COLUMNS/LINES as they are when the console is made (at
        # import); read them when printing instead, as a terminal's size is
        self._width, self._height = kwargs.get("width"), kwargs.get("height")

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is None and not self.is_terminal and not self._environ.get("COLUMNS", "").strip().isdigit():
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    @property
    def unbounded(self) -> bool:
        """Output that is not a terminal, at :data:`PIPE_WIDTH`: renderables
        that fill the width (panels) had better fit their content."""
        return not self.is_terminal and self.width == PIPE_WIDTH

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for renderable in objects:
            fit_annotations(renderable)
        super().print(*objects, **kwargs)


def fit_annotations(renderable: Any) -> Any:
    """``renderable`` (a table, or a group of them) made at least as wide as
    its title and caption, so that they are not folded at the table's width."""
    if isinstance(renderable, Group):
        for part in renderable.renderables:
            fit_annotations(part)
    elif isinstance(renderable, Table):
        widths = [cell_len(a.plain if isinstance(a, Text) else str(a)) for a in (renderable.title, renderable.caption)
                  if isinstance(a, (str, Text))]
        if widths and not renderable.expand:
            renderable.min_width = max(renderable.min_width or 0, *widths)
    return renderable


def cli_console(*, stderr: bool = False) -> CliConsole:
    """A :class:`CliConsole`: on stderr for messages (soft-wrapped: a line
    is never broken by rich), on stdout for tables."""
    # emoji codes off: a text such as "MODULE:FACTORY:" or a ticket's ":smile:" is printed as written
    return CliConsole(stderr=True, soft_wrap=True, emoji=False) if stderr else CliConsole(emoji=False)
