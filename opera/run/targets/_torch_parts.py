"""The parts of a batch's combined torch program (``TorchTemplate.combine``: an ``Independent``
module whose submodule ``parts.<k>`` is the k-th test's model), found in and cut out of the
program torch exported and decomposed.

A batch that fails as a whole is tried again without some of its parts (the gaps it decided, a
part it blames, a half). Exporting and decomposing the smaller combined module again costs what
the first time cost (torch's ``run_decompositions`` is most of a tvm-torch conversion), and gives
the same per-part subgraphs: torch traces and decomposes each part's operator on its own inputs,
and nothing connects two parts. ``cut_program`` keeps the decomposed program's nodes of the
parts that stay instead (``TvmTorchTarget.batch_cut``), so a retry costs only the conversion.
"""

from __future__ import annotations

import copy
import re
from typing import Any

__all__ = ["cut_combined", "cut_program", "fx_decoder", "named_parts", "no_rule_parts", "ov_decompose", "owning_part"]

_PART = re.compile(r"parts\.(\d+)(\.|$)")


def owning_part(node: Any) -> int | None:
    """The part of a ``TorchTemplate.combine`` model an FX node was traced in (``parts.<k>`` in
    its ``nn_module_stack``, kept through torch's decompositions); None unless exactly one."""
    paths = [path for path, _ in (getattr(node, "meta", {}).get("nn_module_stack") or {}).values()]
    owners = {int(m.group(1)) for p in paths if (m := _PART.match(p))}
    return owners.pop() if len(owners) == 1 else None


def cut_combined(whole: Any, keep: list[int], combined: Any) -> bool:
    """``Target.batch_cut`` for a frontend that converts the decomposed program a combined model's
    conversion keeps (``details["decomposed"]``): ``combined`` gets ``whole``'s, cut to the parts
    ``keep``. Not from a cut (its parameters still carry the first numbering)."""
    program = whole.details.get("decomposed")
    counts = getattr(whole.model, "counts", None)
    if program is None or whole.details.get("cut") or counts is None:
        return False
    cut = cut_program(program, keep, list(counts))
    if cut is None:
        return False
    combined.details["decomposed"] = cut
    combined.details["cut"] = True
    return True


def _renumbered(stack: dict[str, Any], new_index: dict[int, int]) -> dict[str, Any]:
    def path(p: str) -> str:
        m = _PART.match(p)
        return p if m is None else f"parts.{new_index[int(m.group(1))]}{p[m.end(1) :]}"

    return {key: (path(p), kind) for key, (p, kind) in stack.items()}


def cut_program(program: Any, keep: list[int], input_counts: list[int]) -> Any | None:
    """The exported (and decomposed) program of a combined module with only the parts ``keep``
    (indices into it, ascending), renumbered ``0..len(keep)-1`` as ``TorchTemplate.combine`` of
    those parts would number them; ``input_counts[k]``: how many user inputs part k takes. None
    where the cut cannot be shown clean, and the caller exports the smaller module instead: an
    output or a placeholder whose part is unknown, a node of a dropped part left behind (an impure
    op), a mutation output (a buffer written back)."""
    import torch
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import ExportGraphSignature, InputKind, OutputKind
    from torch.utils._pytree import TreeSpec

    signature = program.graph_signature
    if any(spec.kind is not OutputKind.USER_OUTPUT for spec in signature.output_specs):
        return None
    if keep != sorted(set(keep)) or any(not 0 <= k < len(input_counts) for k in keep):
        return None
    kept, new_index = set(keep), {old: new for new, old in enumerate(keep)}
    user_owner = [k for k, count in enumerate(input_counts) for _ in range(count)]

    entry = program.module_call_graph[0] if program.module_call_graph else None
    call = entry.signature if entry is not None and entry.fqn == "" else None
    if call is None or len(call.out_spec.children()) != len(input_counts):
        return None
    # the program's outputs, in order, are the leaves of each part's result in turn
    output_owner = [k for k, spec in enumerate(call.out_spec.children()) for _ in range(spec.num_leaves)]
    placeholder_owner: dict[str, int | None] = {}
    user = 0
    for spec in signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            placeholder_owner[spec.arg.name] = user_owner[user] if user < len(user_owner) else None
            user += 1
        else:  # a parameter, buffer or constant of the module: its target names its part
            m = _PART.match(spec.target or "")
            placeholder_owner[spec.arg.name] = int(m.group(1)) if m else None
    if user != len(user_owner):
        return None

    graph_module = copy.deepcopy(program.graph_module)
    graph = graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    results = list(output.args[0])
    if len(results) != len(signature.output_specs) or len(results) != len(output_owner):
        return None
    for result, owner in zip(results, output_owner, strict=True):
        if not isinstance(result, torch.fx.Node):
            continue  # a constant output
        found = placeholder_owner.get(result.name) if result.op == "placeholder" else owning_part(result)
        if found != owner:  # not made inside its own part: cannot say the cut is clean
            return None
    chosen = [k for k, owner in enumerate(output_owner) if owner in kept]
    output.args = (tuple(results[k] for k in chosen),)
    graph.eliminate_dead_code()
    for node in reversed(list(graph.nodes)):  # what DCE keeps of a dropped part: its asserts
        if node.op == "call_function" and not node.users and owning_part(node) not in kept:
            graph.erase_node(node)

    dropped: set[str] = set()
    for node in list(graph.nodes):
        if node.op == "placeholder":
            held_by = placeholder_owner.get(node.name)
            if held_by is None:
                return None
            if held_by not in kept:
                if node.users:
                    return None
                dropped.add(node.name)
                graph.erase_node(node)
            continue
        if node.op in ("output", "get_attr"):
            continue
        made_in = owning_part(node)
        if made_in not in kept:  # a dropped part's node DCE kept (impure), or no one part's
            return None
        if any(
            arg.op == "placeholder" and placeholder_owner.get(arg.name) != made_in
            for arg in node.all_input_nodes
        ):
            return None  # it reads another part's input (torch.export merged aliased inputs)
        node.meta["nn_module_stack"] = _renumbered(node.meta["nn_module_stack"], new_index)
    graph.lint()
    graph_module.recompile()

    input_specs = [spec for spec in signature.input_specs if spec.arg.name not in dropped]
    output_specs = [signature.output_specs[k] for k in chosen]
    targets = {spec.target for spec in input_specs if spec.kind is not InputKind.USER_INPUT}
    state_dict = {name: value for name, value in program.state_dict.items() if name in targets}
    constants = {name: value for name, value in program.constants.items() if name in targets}
    kept_users = [i for i, owner in enumerate(user_owner) if owner in kept]
    arguments = call.in_spec.child(0)
    in_spec = TreeSpec(
        tuple,
        None,
        [
            TreeSpec(tuple, None, [arguments.child(i) for i in kept_users]),
            call.in_spec.child(1),
        ],
    )
    out_spec = TreeSpec(tuple, None, [call.out_spec.child(k) for k in keep])
    names = (
        [call.forward_arg_names[i] for i in kept_users] if call.forward_arg_names else call.forward_arg_names
    )
    module_call_graph = [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec, names))]
    return torch.export.ExportedProgram(
        root=graph_module,
        graph=graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict,
        range_constraints={s: r for s, r in program.range_constraints.items() if s in _symbols(graph)},
        module_call_graph=module_call_graph,
        example_inputs=None,
        constants=constants,
        verifiers=program.verifiers,
    )


def _symbols(graph: Any) -> set[Any]:
    """The shape symbols the graph's values still use (a dropped part's take its ranges along)."""
    import torch

    found: set[Any] = set()
    for node in graph.nodes:
        value = node.meta.get("val")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            sizes = list(item.shape) if isinstance(item, torch.Tensor) else [item]
            for size in sizes:
                if isinstance(size, torch.SymInt):
                    found |= size.node.expr.free_symbols
    return found


def ov_decompose(program: Any) -> Any | None:
    """OpenVINO's own first step of ``convert_model(program)`` (``TorchFXPythonDecoder.
    from_exported_program``): ``run_decompositions`` with its table, the torch default less
    ``ops_to_not_decompose()``. The table is OpenVINO's, built by OpenVINO's code (a decoder made
    once of a one-op program), not a copy. None before torch 2.6, where OpenVINO decomposes
    another way (the caller converts the program as a single test does)."""
    import torch
    from openvino.frontend.pytorch.fx_decoder import TorchFXPythonDecoder
    from packaging import version

    if version.parse(torch.__version__) < version.parse("2.6"):
        return None
    if TorchFXPythonDecoder._decomp_table is None:
        TorchFXPythonDecoder.from_exported_program(torch.export.export(torch.nn.ReLU(), (torch.zeros(1),)))
    return program.run_decompositions(TorchFXPythonDecoder._decomp_table)


def fx_decoder(decomposed: Any) -> Any:
    """OpenVINO's second step: the decoder ``from_exported_program`` makes of the decomposed
    program (``cls(exported_program.module(), dynamic_shapes=True)``)."""
    from openvino.frontend.pytorch.fx_decoder import TorchFXPythonDecoder

    return TorchFXPythonDecoder(decomposed.module(), dynamic_shapes=True)


# a node by its torch name, which begins OpenVINO's names of what it made of it: in a conversion
# failure ("conversion of operation getitem_9/<built-in function getitem>", "PtFrameworkNode
# getitem_8/...") and in the CPU plugin's at inference ("[CPU] Add node with name
# '_cdist_forward_3/aten._cdist_forward.default/Subtract_2'")
_OV_NODE = re.compile(r"(?:conversion of operation |PtFrameworkNode |node with name ')([A-Za-z_][\w]*)/")
_OV_NO_RULE = re.compile(r"No conversion rule found for operations: (.+)")


def named_parts(message: str, program: Any) -> set[int]:
    """The parts of a combined program whose nodes an OpenVINO failure names (a conversion's, or
    the CPU plugin's at inference), by node name or by an op no conversion rule exists for."""
    names = set(_OV_NODE.findall(message))
    ops = {op.strip() for m in _OV_NO_RULE.findall(message) for op in m.split(",")}
    found: set[int] = set()
    for node in program.graph.nodes:
        if node.op == "call_function" and (node.name in names or str(node.target) in ops):
            owner = owning_part(node)
            if owner is not None:
                found.add(owner)
    return found


# OpenVINO's report when nothing but missing conversion rules stopped a conversion (its
# UnconvertedOpsReport keeps the ops in a std::map: sorted, each once). A report that also holds a
# translator's failure ("Failed operations detailed log", "-- Conversion is failed for") does not match.
_OV_ONLY_NO_RULE = re.compile(
    r"\AOpConversionFailure: (?P<head>[^\n]*\n[^\n]*\nModel wasn't fully converted\.\nSummary:\n"
    r"-- No conversion rule found for operations: )(?P<ops>[^\n]+)\n\Z"
)


def no_rule_parts(failure: str, program: Any) -> dict[int, Exception] | None:
    """For ``OvTorchTarget.batch_gaps``: where a combined program's conversion failed only on ops
    without a conversion rule, each part owning such an op, with the ``OpConversionFailure`` its
    own conversion raises (the same report of its own ops). OpenVINO converts every node before it
    reports, and looks a rule up by the op alone, so a part alone lacks exactly the rules for its own
    ops the batch's report names; a report with any other failure in it is not decided (None), nor
    one naming an op no single part owns."""
    from openvino._pyopenvino import OpConversionFailure

    found = _OV_ONLY_NO_RULE.match(failure)
    if found is None or program is None:
        return None
    named = {op.strip() for op in found.group("ops").split(",")}
    missing: dict[int, set[str]] = {}
    for node in program.graph.nodes:
        if node.op != "call_function" or str(node.target) not in named:
            continue
        owner = owning_part(node)
        if owner is None:
            return None
        missing.setdefault(owner, set()).add(str(node.target))
    if not missing or set().union(*missing.values()) != named:
        return None
    return {k: OpConversionFailure(found.group("head") + ", ".join(sorted(ops)) + "\n") for k, ops in missing.items()}
