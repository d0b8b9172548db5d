"""ONNX harvest sources: the ONNX backend node tests (the human-written test suite of the spec).

``onnx.backend.test.loader.load_node_model_tests()`` rebuilds ~1.9k node test cases in memory
(model + data sets of real input/output arrays; the data files are no longer in the wheel). Every
instance keeps the test's REAL input values (exact arrays): the original artifact kept only shapes
and regenerated random values, which lost tests whose meaning is in the values (indices, masks,
shapes, NaN handling).

``_expanded`` cases (an op's function body spelled out as primitive nodes: ~480 cases, ~12.5k
nodes) would flood the corpus with Add/Mul/Reshape/... nodes whose operator is harvested from its
own plain case anyway, so only the nodes of operators that NO plain case tests are kept from them
(``SequenceEmpty``, ``SequenceLength``, ``RandomUniformLike`` in onnx 1.23). Their inputs are
intermediate values, computed exactly with ``onnx.reference.ReferenceEvaluator(...,
intermediate=True)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from opera.instrumentation import BaseRecorder, HarvestOptions, harvest_source
from opera.model import OperatorInstance, Source, Tolerance

__all__ = ["load_node_cases", "node_test_instances"]

SUITE = "onnx-node-tests"


def load_node_cases() -> list[Any]:
    """The node test cases (about 9 s: every case's reference outputs are computed on load)."""
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        return list(load_node_model_tests())


def is_expanded(case: Any) -> bool:
    return "_expanded" in case.name


def node_test_instances(
    case: Any, library_version: str, intermediate: bool = False
) -> list[OperatorInstance]:
    """One instance per node of ``case.model``, fed the first data set's real inputs.

    ``intermediate``: also give inner nodes their exact input values (from the reference
    evaluator) instead of ``TensorSpec``s from shape inference.
    """
    from opera.instrumentation.onnx_recorder import node_instances, recorded_values

    values: dict[str, Any] = {}
    if case.data_sets:
        inputs, _outputs = case.data_sets[0]
        initializers = {init.name for init in case.model.graph.initializer}
        names = [vi.name for vi in case.model.graph.input if vi.name not in initializers]
        feeds = dict(zip(names, inputs, strict=False))
        values = recorded_values(case.model, feeds, intermediate=intermediate)
    rtol, atol = getattr(case, "rtol", None), getattr(case, "atol", None)
    tolerance = Tolerance(atol=atol, rtol=rtol) if rtol is not None or atol is not None else None
    return node_instances(case.model, Source(SUITE, test=case.name), library_version, values, tolerance)


@harvest_source("onnx", "node-tests", default=True)
def node_tests(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """ONNX backend node tests (onnx.backend.test), real input values, one instance per node."""
    emitted = 0
    version = recorder.library_version()
    cases = load_node_cases()
    tested = {node.op_type for case in cases if not is_expanded(case) for node in case.model.graph.node}
    for case in cases:
        expanded = is_expanded(case)
        if expanded and all(node.op_type in tested for node in case.model.graph.node):
            continue
        try:
            instances = node_test_instances(case, version, intermediate=expanded)
        except Exception as exc:  # one unreadable case must not end the harvest
            recorder.note_error(f"{case.name}: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        if expanded:
            instances = [inst for inst in instances if inst.api.removeprefix("onnx::") not in tested]
        for inst in instances:
            if options.limit is not None and emitted >= options.limit:
                return
            emitted += 1
            yield inst
