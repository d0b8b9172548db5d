"""The harvest stage: run a library's own test suite with a recorder attached (``driver``; the
recorders live in ``instrumentation/``), describe the corpus it wrote (``manifest``, ``stats``)."""
