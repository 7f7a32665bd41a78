"""The report's default bootstrap settings, apart from the modules that use
them: the ``cirrus report`` and ``cirrus gate`` options name them without
importing polars and the report code (``cirrus --help`` and the start of
``cirrus eval`` stay fast)."""

DEFAULT_N_BOOT = 2000  # bootstrap resamples
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
