"""Tool-generated operator instances: type-aware mutation of harvested ones (issue 6).

The paper migrates tests from human-written library tests and from two fuzzers' outputs; this
package is Opera's own tool-generated source. Modules, in the order data flows through them:

* ``profiles``: per-operator, per-parameter value profiles learned from harvested instances;
* ``related``: related operators whose values can be borrowed (``nn.Conv2d`` <-> ``F.conv2d``);
* ``mutations``: the mutation operators per value kind;
* ``feedback``: the validity learner (prefer mutations the library accepts);
* ``gate``: the harvest's validity gate, run in an isolated child process;
* ``novelty``: new parameter partitions / pairs with respect to the human corpus;
* ``steering``: ``--steer coverage``, toward operator-level coverage the corpus lacks;
* ``driver``: ``generate``, what ``opera generate`` calls.
"""

from __future__ import annotations

from opera.generate.driver import (
    GENERATED_SUITE,
    GENERATOR,
    GenerateOptions,
    GenerateSummary,
    LibraryFigures,
    generate,
)

__all__ = [
    "GENERATED_SUITE",
    "GENERATOR",
    "GenerateOptions",
    "GenerateSummary",
    "LibraryFigures",
    "generate",
    "is_generated_suite",
]


def is_generated_suite(suite: str) -> bool:
    """Whether a result's ``source_suite`` (the store column) names tool-generated instances."""
    return suite == GENERATED_SUITE
