"""Templates: one per source library, turning an ``OperatorInstance`` into a single-operator model.

A template ``build``s a ``SingleOpModel``: the model in its own library, the seeded runtime inputs
(numpy) and a way to compute the library's reference output. Frontend-facing artifacts (a
``torch.export`` program, an ONNX ``ModelProto``, a TFLite flatbuffer, a Keras model) and standalone
reproducer scripts are produced by the same template module (docs/design.md, Templates).

Adding a library means adding ``<lib>_template.py`` here with a ``Template`` subclass decorated
with ``@register_template`` (and a recorder, ``instrumentation/<lib>_recorder.py``): the library's
name is then known everywhere (corpora, harvest, run) with no table to edit. A third-party package
names its template module in the ``opera.templates`` entry point group. A template module is
imported only when its library is used (it imports the library: seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.registry import Registry

__all__ = [
    "TEMPLATES",
    "OptionalInputProbe",
    "SingleOpModel",
    "Template",
    "get_template",
    "keyword_default_references",
    "output_signature",
    "register_template",
]



@dataclass
class SingleOpModel:
    """An instance rebuilt as a model of its library, with concrete runtime inputs.

    ``model`` is library-specific (an ``nn.Module``, a ``keras.Model``, an ONNX ``ModelProto``);
    ``inputs`` are the runtime tensors as numpy arrays, in the model's positional order.
    """

    instance: OperatorInstance
    model: Any
    inputs: list[np.ndarray]
    input_names: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptionalInputProbe:
    """What the library computes for an optional input given at run time: with it omitted, and with
    ``moved`` fed at ``position`` in its place (``moved_outputs``)."""

    name: str
    position: int
    omitted_outputs: list[np.ndarray]
    moved: np.ndarray
    moved_outputs: list[np.ndarray]


class Template:
    library: str = ""

    def build(self, inst: OperatorInstance, seed: int = 0) -> SingleOpModel:
        """Rebuild ``inst`` as a single-operator model; raise on anything the library rejects."""
        raise NotImplementedError

    def reference(self, built: SingleOpModel) -> list[np.ndarray]:
        """Run the model in its own library on ``built.inputs``; outputs flattened to a list."""
        raise NotImplementedError

    def second_reference(self, built: SingleOpModel, inputs: list[np.ndarray]) -> tuple[str, list[np.ndarray]] | None:
        """An independent second computation of the same outputs, as ``(its name, outputs)``, or None
        where the library offers none. Asked only when a compiler disagrees with ``reference``: if
        the two references disagree beyond tolerance, the library is not a trustworthy judge of
        this instance (``unstable-reference``), whatever the compiler did."""
        return None

    def default_attribute_references(self, built: SingleOpModel, inputs: list[np.ndarray]) -> Iterator[tuple[str, list[np.ndarray]]]:
        """For each attribute ``built`` sets to a value other than its documented default: (what
        was set, the library's outputs with that attribute at its default). Asked only when a
        compiler disagrees with the reference: a compiler whose outputs are exactly those ignores
        the attribute (a coverage gap, not a wrong result). None where the library has no defaults."""
        return iter(())

    def optional_input_references(
        self, built: SingleOpModel, inputs: list[np.ndarray]
    ) -> Iterator[OptionalInputProbe]:
        """For each optional input ``built`` gives at run time, the library's outputs with it
        omitted and with another value of it (``OptionalInputProbe``). Asked only when a compiler
        disagrees with the reference; the judge then checks that the compiler's outputs do not move
        when that input does (an input the frontend drops: a coverage gap). None where the library
        has no optional inputs."""
        return iter(())

    def older_version_shapes(self, built: SingleOpModel) -> tuple[str, list[tuple[int, ...]]] | None:
        """Where the operator's previous version defines other output shapes for this very model
        than the version the model selects: (that version's name, its output shapes). Asked only
        when a compiler's outputs differ: a compiler whose output shapes are exactly the older
        version's implements that version (a coverage gap). None where the library has no versions."""
        return None

    def lowered_reference(self, built: SingleOpModel, inputs: list[np.ndarray]) -> tuple[str, list[np.ndarray]] | None:
        """The library's own lowering of the model (what a frontend that converts it receives), run
        by the library, as (its name, outputs); None where there is none. Asked for targets that
        convert that lowering (``Target.converts_library_lowering``) when their outputs differ."""
        return None

    def draws_random(self, built: SingleOpModel) -> str | None:
        """What in ``built`` draws random numbers though its API is not a random one (an operator
        that samples internally), or None. Asked when a compiler's values differ: another
        implementation may draw other numbers, so only count, shapes and dtypes are compared."""
        return None

    reference_name: str = ""  # what computes the expected outputs, in a bug report's words

    def combine(self, parts: list[SingleOpModel]) -> SingleOpModel | None:
        """One model computing every part independently, its inputs the parts' inputs one after
        the other and its outputs theirs, flattened in order (batched compilation: one export,
        conversion and build for many tests). None: this library cannot combine them."""
        return None

    def doc_url(self, api: str) -> str | None:
        """Where the library documents ``api`` (what a bug report cites as the expected semantics)."""
        return None

    def validate(self, inst: OperatorInstance, seed: int = 0) -> OperatorInstance:
        """The validity gate: rebuild and run ``inst`` in its library (docs/design.md, Harvest)."""
        if inst.valid is False and (inst.invalid_reason or "").startswith("expected error:"):
            return inst  # recorded where its test expects it to fail (the pytest plugin's verdict)
        reason = inst.opaque_reason
        if reason is not None:
            return inst.with_verdict(False, f"not migratable: {reason}")
        try:
            built = self.build(inst, seed)
            outputs = self.reference(built)
        except Exception as exc:  # the library rejecting the instance is the verdict itself
            msg = f"{type(exc).__name__}: {exc}".strip().splitlines()
            return inst.with_verdict(False, (msg[0] if msg else type(exc).__name__)[:300])
        rejected = built.details.get("library_rejects")
        if rejected:  # the library refuses the model as the frontends get it
            return inst.with_verdict(False, str(rejected)[:300])
        return inst.with_verdict(True, None, output_signature(outputs))


def output_signature(outputs: list[np.ndarray]) -> tuple[str, ...]:
    """``["float32[2,3]", ...]``: what a valid run of the instance produced."""
    return tuple(f"{np.asarray(o).dtype}[{','.join(str(d) for d in np.shape(o))}]" for o in outputs)


def keyword_default_references(
    template: Template,
    built: SingleOpModel,
    inputs: list[np.ndarray],
    rebuild: Callable[[OperatorInstance], SingleOpModel],
) -> Iterator[tuple[str, list[np.ndarray]]]:
    """``default_attribute_references`` for libraries whose parameters are call keywords (torch,
    Keras): the instance rebuilt (``rebuild``) with one plain keyword argument at a time left out,
    so that the function's or constructor's own default applies, run by the library on the same
    ``inputs``; then every argument that changed the outputs, left out together (a frontend
    ignoring two of them matches neither single variant). An argument whose default gives the same
    outputs bit for bit says nothing and is not yielded. Tensor arguments are
    model data, not parameters; a variant the library rejects (a required keyword) or that has
    other inputs is skipped. The project's rule, as for ONNX attributes: a compiler whose outputs
    are exactly a variant's ignores that argument, a coverage gap (docs/design.md)."""
    inst = built.instance

    def without(names: list[str]) -> list[np.ndarray] | None:
        try:
            other = rebuild(replace(inst, kwargs={k: v for k, v in inst.kwargs.items() if k not in names}))
            if len(other.inputs) != len(inputs):
                return None
            other.inputs = [np.array(x, copy=True) for x in inputs]
            return template.reference(other)
        except Exception:
            return None

    try:
        reference = template.reference(replace(built, inputs=[np.array(x, copy=True) for x in inputs]))
    except Exception:
        return
    moving = []
    for name in [k for k, v in inst.kwargs.items() if not _holds_tensor(v)]:
        outputs = without([name])
        if outputs is None or _same_outputs(outputs, reference):
            continue
        moving.append(name)
        yield f"{name}={_plain_text(inst.kwargs[name])}", outputs
    if len(moving) > 1:
        outputs = without(moving)
        if outputs is not None:
            yield ", ".join(f"{k}={_plain_text(inst.kwargs[k])}" for k in moving), outputs


def _holds_tensor(value: Any) -> bool:
    """A tensor, or a container with one inside: model data, not a parameter."""
    from opera.values import TensorSpec

    if isinstance(value, (np.ndarray, TensorSpec)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def _same_outputs(a: list[Any], b: list[Any]) -> bool:
    """Bit for bit (NaN where NaN)."""
    try:
        return len(a) == len(b) and all(
            np.shape(x) == np.shape(y)
            and np.asarray(x).dtype == np.asarray(y).dtype
            and np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind in "fc")
            for x, y in zip(a, b, strict=True)
        )
    except Exception:
        return False


def _plain_text(value: Any) -> str:
    """A keyword argument's value as a bug report names it (``-1``, ``'sum'``, ``float64``)."""
    from opera.values import CallableRef, DType, EnumValue

    if isinstance(value, (DType, EnumValue)):
        return value.name
    if isinstance(value, CallableRef):
        return value.qualname
    return repr(value)[:80]


TEMPLATES: Registry[type[Template]] = Registry("template", __name__, group="opera.templates", module_suffix="_template")


def register_template(cls: type[Template]) -> type[Template]:
    """Class decorator: the template of ``cls.library`` (its module must be ``<library>_template``)."""
    if not cls.library:
        raise ValueError(f"{cls.__qualname__} has no library")
    return TEMPLATES.add(cls.library, cls)


_cache: dict[str, Template] = {}


def get_template(library: str) -> Template:
    """The (cached) template instance of ``library``."""
    if library not in _cache:
        _cache[library] = TEMPLATES.get(library)()
    return _cache[library]
