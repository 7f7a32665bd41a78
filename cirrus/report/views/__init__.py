"""What the report shows, computed: pure functions from the report's polars
tables (and the runs' frames) to the rows a page or a terminal shows.  No
file is read or written here, no HTML and no chart is made: the page
(:mod:`cirrus.report.html`, :mod:`cirrus.report.charts`) and the terminal
(:mod:`cirrus.commands.report`) only render these.

* :mod:`~cirrus.report.views.cells`: how a value reads in a cell;
* :mod:`~cirrus.report.views.leaderboard`: intervals by run, leaderboard and paired rows;
* :mod:`~cirrus.report.views.breakdowns`: the groups of a breakdown, the reply-type rows;
* :mod:`~cirrus.report.views.noise`: the ``≈`` marks, the Noise section, the noise lines;
* :mod:`~cirrus.report.views.cost`: the Cost section;
* :mod:`~cirrus.report.views.depth`: TPR by checkpoint depth;
* :mod:`~cirrus.report.views.failures`: failed turns by category;
* :mod:`~cirrus.report.views.dataset`: the Dataset section;
* :mod:`~cirrus.report.views.transcripts`: the task table and the transcripts;
* :mod:`~cirrus.report.views.diff`: where two runs part, linked to the transcripts;
* :mod:`~cirrus.report.views.subtask`: the subtask runs' tables (Table 4, Figure 6);
* :mod:`~cirrus.report.views.gate`: ``cirrus gate``'s table, Markdown and JUnit XML.
"""
