"""``cirrus view``: a local web application over a workspace's runs (issue 27
item 1, docs/view.md): the leaderboard, one run's attempts, one attempt's
walk checkpoint by checkpoint and the same attempt of two runs side by side.

* :func:`create_app` (:mod:`cirrus.view.app`): the ASGI app (Starlette).
* :class:`ViewServer` (:mod:`cirrus.view.server`): uvicorn on 127.0.0.1 by
  default, in the foreground or on a background thread.
"""

from cirrus.view.app import create_app
from cirrus.view.server import DEFAULT_HOST, ViewServer

__all__ = ["DEFAULT_HOST", "ViewServer", "create_app"]
