"""The commands of ``cirrus``, one module each: parse the options, call a
library function of the domain packages, print the result.  Nothing outside
this package (and :mod:`cirrus.cli`, which builds the typer app from it)
imports typer, a rich console or these modules.

Shared by the commands: :mod:`cirrus.commands._common` (the two consoles,
``fail`` and the exit statuses, the ``--workspace`` option) and
:mod:`cirrus.commands._console` (the console that keeps ids whole when
piped).
"""
