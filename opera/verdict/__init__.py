"""Where a verdict is decided: the oracles and the rules that turn what a target did into an outcome.

``judge`` compares a compiler's outputs with the reference (``oracles`` + ``oracles.toml``),
``undefined`` holds the rules for inputs outside an operator's defined domain, ``unsupported``
(+ ``unsupported.toml``) tells a coverage gap from a crash, and ``signature`` / ``converters``
name a failure so that one defect is one signature.
"""
