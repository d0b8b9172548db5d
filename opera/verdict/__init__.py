"""Where a verdict is decided: the oracles and the rules that turn what a target did into an outcome.

``judge`` decides, comparing a compiler's outputs with the reference (``oracles`` +
``oracles.toml``); ``undefined`` holds the rules for output values an operator's specification
leaves undefined; ``unsupported`` (+ ``unsupported.toml``) tells a coverage gap from a crash;
``config`` reads both TOML files; ``signature`` names a failure (an inconsistency by the target's
``converter_name``) so that one defect is one signature (docs/design.md, Verdict).
"""
