"""The ledger of known bugs (opera/triage/ledger.py, bugs/ledger.toml): parsing and every bad
input, matching root causes by id and by signature + features, and the ledger in use by
`opera triage`, `opera bugs` and `opera nightly` on real runs of the test targets."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import ONNX_EXTRA, fault, relus, write

from opera.cli import main
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Source
from opera.triage.ledger import DEFAULT_LEDGER, Ledger, load_ledger, resolve_ledger
from opera.triage.root_causes import EVERY_INSTANCE, RootCause

ROOT = Path(__file__).resolve().parent.parent
URL = "https://github.com/example/compiler/issues/1"
SIG = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v13:KeyError"


def _ledger(tmp_path: Path, text: str, name: str = "ledger.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _cause(
    target: str = "tvm-onnx",
    signature: str = SIG,
    features: tuple[str, ...] = ("dtype:float16",),
    error: str = "KeyError: 'axis'",
) -> RootCause:
    key = "|".join((target, signature, error, "+".join(features)))
    return RootCause(target, "crash", features, error, signatures=[signature], apis=["onnx::Foo"], keys=[key])


# ---- parsing ----------------------------------------------------------------------------------


def test_the_shipped_ledger_loads_and_its_commented_example_is_a_valid_entry(tmp_path: Path) -> None:
    shipped = ROOT / DEFAULT_LEDGER
    ledger = load_ledger(shipped)
    assert isinstance(ledger, Ledger)
    # the header's example, uncommented, must be an entry this reader accepts
    text = shipped.read_text(encoding="utf-8")
    example = "\n".join(
        line[2:]
        for line in text.splitlines()
        if line.startswith("# ") and (line[2:] == "[[bug]]" or re.match(r"^\w+ = ", line[2:]))
    )
    entries = load_ledger(_ledger(tmp_path, example.replace("NNNNN", "12345"))).entries
    assert len(entries) == 1 and entries[0].status == "reported" and entries[0].id == "rc-0123456789"
    assert entries[0].features == ("attribute:axis",) and entries[0].versions == ("tvm 0.27.0",)


def test_every_field_is_read(tmp_path: Path) -> None:
    path = _ledger(
        tmp_path,
        f"""
[[bug]]
id = "rc-00aa11bb22"
target = "tvm-onnx"
status = "fixed"
url = "{URL}"
fixed_in = "0.28.0"
verdict = "REAL"
title = "a title"
versions = ["tvm 0.27.0"]

[[bug]]
target = "ov-onnx"
signature = "inconsistent:ov-onnx:onnx::Resize"
features = ["attribute:antialias"]
error = "Resize"
status = "not-a-bug"
reason = "the spec leaves it open"
verdict = "UNDEFINED"

[[bug]]
target = "ov-onnx"
signature = "inconsistent:ov-onnx:onnx::Cast"
status = "new"
""",
    )
    a, b, c = load_ledger(path).entries
    assert (a.index, a.id, a.status, a.url, a.fixed_in, a.verdict, a.title, a.versions) == (
        1, "rc-00aa11bb22", "fixed", URL, "0.28.0", "REAL", "a title", ("tvm 0.27.0",)
    )
    assert a.label == f"known (fixed in 0.28.0: {URL})"
    assert (b.features, b.error, b.reason, b.verdict) == (("attribute:antialias",), "Resize", "the spec leaves it open", "UNDEFINED")
    assert b.label == "known (not a bug: the spec leaves it open)"
    assert c.label == "known (triaged, not reported yet)" and c.name == "bug #3"
    assert load_ledger(_ledger(tmp_path, "", "empty.toml")).entries == []


_GOOD = f'target = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "reported"\nurl = "{URL}"\n'

BAD = {
    "not TOML": ("[[bug]\n", "not valid TOML"),
    "top-level key": ('title = "x"\n', "unknown top-level key(s) title"),
    "bug as one table": (f"[bug]\n{_GOOD}", "write each entry as [[bug]]"),
    "unknown key": (f'[[bug]]\n{_GOOD}statsu = "x"\n', "bug #1: unknown key(s) statsu"),
    "missing target": (f'[[bug]]\nsignature = "{SIG}"\nstatus = "new"\n', "bug #1: missing required key 'target'"),
    "missing status": (f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\n', "bug #1: missing required key 'status'"),
    "unknown status": (
        '[[bug]]\nid = "rc-0a"\ntarget = "tvm-onnx"\nstatus = "open"\n',
        "bug #1 (rc-0a): unknown status 'open' (use one of new, reported, fixed, not-a-bug)",
    ),
    "neither id nor signature": ('[[bug]]\ntarget = "tvm-onnx"\nstatus = "new"\n', "needs 'id'"),
    "a short error alone": (
        '[[bug]]\ntarget = "tvm-onnx"\nerror = "KeyError"\nstatus = "new"\n',
        "error 'KeyError' without a signature is too short to name one defect",
    ),
    "bad id": ('[[bug]]\nid = "42"\ntarget = "tvm-onnx"\nstatus = "new"\n', "id '42' is not a root cause id"),
    "signature of another target": (
        f'[[bug]]\ntarget = "ov-onnx"\nsignature = "{SIG}"\nstatus = "new"\n',
        "is not one of target 'ov-onnx'",
    ),
    "reported without url": (
        f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "reported"\n',
        "status 'reported' needs 'url'",
    ),
    "not a url": (
        f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "reported"\nurl = "issue 12"\n',
        "url 'issue 12' is not an http(s) URL",
    ),
    "fixed without fixed_in": (
        f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "fixed"\nurl = "{URL}"\n',
        "status 'fixed' needs 'fixed_in'",
    ),
    "fixed_in as a number": (
        f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "fixed"\nurl = "{URL}"\nfixed_in = 0.28\n',
        "'fixed_in' must be a non-empty string, not 0.28",
    ),
    "fixed_in on a reported bug": (f'[[bug]]\n{_GOOD}fixed_in = "1.0"\n', "'fixed_in' goes with status 'fixed'"),
    "not-a-bug without reason": (
        f'[[bug]]\ntarget = "tvm-onnx"\nsignature = "{SIG}"\nstatus = "not-a-bug"\n',
        "status 'not-a-bug' needs 'reason'",
    ),
    "unknown verdict": (f'[[bug]]\n{_GOOD}verdict = "BUG"\n', "unknown verdict 'BUG'"),
    "features not a list": (f'[[bug]]\n{_GOOD}features = "dtype:float16"\n', "'features' must be a list"),
    "empty error": (f'[[bug]]\n{_GOOD}error = ""\n', "'error' must be a non-empty string"),
    "duplicate id": (
        '[[bug]]\nid = "rc-0a"\ntarget = "t"\nstatus = "new"\n[[bug]]\nid = "rc-0a"\ntarget = "t"\nstatus = "new"\n',
        "bug #2 (rc-0a): the same id as bug #1 (rc-0a)",
    ),
    "duplicate keys": (f"[[bug]]\n{_GOOD}[[bug]]\n{_GOOD}", "bug #2: the same target, signature, features and error as bug #1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_ledger_is_one_line_naming_the_file_and_the_entry(tmp_path: Path, case: str) -> None:
    text, expected = BAD[case]
    # the bad entry comes second when there is a good one before it: the index must say which
    good_first = case not in ("not TOML", "top-level key", "bug as one table", "duplicate id", "duplicate keys")
    if good_first:
        text = '[[bug]]\nid = "rc-ffff"\ntarget = "x"\nstatus = "new"\n' + text
        expected = expected.replace("bug #1", "bug #2")
    path = _ledger(tmp_path, text)
    with pytest.raises(OperaError) as info:
        load_ledger(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"ledger {path}: ") and expected in message, message


def test_a_bad_or_missing_ledger_is_exit_2_through_every_command(tmp_path: Path, capsys) -> None:
    bad = _ledger(tmp_path, '[[bug]]\ntarget = "test-wrong"\nid = "rc-01"\nstatus = "fixed"\nurl = "https://x.org/1"\n')
    store = tmp_path / "opera.db"
    corpus = write(tmp_path / "c.jsonl", relus(1))
    assert main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]) == 0
    capsys.readouterr()
    for argv in (
        ["triage", "--store", str(store), "-q", "-o", str(tmp_path / "t")],
        ["bugs", "--store", str(store)],
        ["nightly", str(corpus), "-t", "test-wrong", "--store", str(tmp_path / "n.db"), "-q"],
    ):
        for ledger, expected in ((bad, "bug #1 (rc-01): status 'fixed' needs 'fixed_in'"), (tmp_path / "none.toml", "ledger not found")):
            assert main([*argv, "--ledger", str(ledger)]) == 2, argv
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and expected in err[0], (argv, err)
    assert not (tmp_path / "n.db").exists()  # the nightly refused before storing anything


def test_the_default_ledger_is_the_current_directorys_and_none_is_no_ledger(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_ledger(None) is None
    (tmp_path / "bugs").mkdir()
    (tmp_path / DEFAULT_LEDGER).write_text(f'[[bug]]\n{_GOOD}')
    found = resolve_ledger(None)
    assert found is not None and len(found) == 1 and found.path == Path(DEFAULT_LEDGER)
    with pytest.raises(OperaError, match="ledger not found"):
        resolve_ledger("elsewhere.toml")


# ---- matching ---------------------------------------------------------------------------------


def test_matching_by_id_then_by_signature_features_and_error(tmp_path: Path) -> None:
    f16 = _cause(features=("dtype:float16",))
    pair = _cause(features=("dtype:float16", "rank:0"), error="KeyError: 'axis' in Foo")
    other_error = _cause(features=("dtype:int8",), error="KeyError: 'keepdims'")
    other_target = _cause(target="ov-onnx", signature="crash:ov-onnx:x.cpp:KeyError")
    path = _ledger(
        tmp_path,
        f"""
[[bug]]
target = "tvm-onnx"
signature = "{SIG}"
status = "reported"
url = "{URL}"

[[bug]]
target = "tvm-onnx"
signature = "{SIG}"
features = ["dtype:float16"]
error = "'axis'"
status = "new"

[[bug]]
id = "{other_error.id}"
target = "tvm-onnx"
status = "not-a-bug"
reason = "keepdims is not an ONNX attribute of Foo"

[[bug]]
target = "tvm-onnx"
signature = "crash:tvm-onnx:other.py:f:KeyError"
status = "new"

[[bug]]
target = "ov-onnx"
signature = "crash:ov-onnx:y.cpp:KeyError"
status = "new"

[[bug]]
target = "trt-onnx"
signature = "crash:trt-onnx:y.cpp:KeyError"
status = "new"
""",
    )
    ledger = load_ledger(path)
    general, specific, by_id, elsewhere, ov, trt = ledger.entries
    # the most specific entry whose keys all agree: features a subset, error a substring
    assert ledger.match(f16) is specific and ledger.match(pair) is specific
    # an id wins over keys that also match (the general entry's signature matches it too)
    assert general.matches_keys(other_error) and ledger.match(other_error) is by_id
    # the features must all be the root cause's; the error must be a substring of its error line
    assert not specific.matches_keys(_cause(features=("dtype:int8",)))
    assert not specific.matches_keys(_cause(error="KeyError: 'keepdims'"))
    assert ledger.match(_cause(features=("dtype:int8",))) is general
    # another target's root cause with the same id is not this entry's
    moved = RootCause("ov-onnx", "crash", (), "", signatures=["crash:ov-onnx:z.cpp:E"], keys=other_error.keys)
    assert moved.id == other_error.id and ledger.match(moved) is None
    assert ledger.match(other_target) is None

    found = ledger.classify([f16, pair, other_error, other_target], targets=["tvm-onnx", "ov-onnx"])
    assert [(c.id, e.index) for c, e in found.known] == [(f16.id, 2), (pair.id, 2), (other_error.id, 3)]
    assert found.new == [other_target]
    assert found.unmatched == [general, elsewhere, ov] and found.unchecked == [trt]
    assert found.mark(other_target) == "new" and found.mark(other_error).startswith("known (not a bug:")
    assert found.as_json(f16) == {"known": True, "entry": 2, "status": "new"}
    assert found.as_json(other_target) == {"known": False}
    lines = found.lines(path)
    assert lines[0] == f"ledger {path}: 3 root cause(s) known, 1 new"
    assert lines[1] == f"ledger {path}: bug #1, tvm-onnx; signature {SIG}: matched no root cause"
    assert lines[-1].endswith("1 entry(ies) of other targets not checked (trt-onnx)")
    # an empty ledger knows nothing and lists nothing
    assert Ledger(path).classify([f16]).new == [f16] and Ledger(path).classify([f16]).lines(path)[1:] == []


def test_an_entry_that_found_its_own_root_cause_does_not_claim_a_new_one_by_signature(tmp_path: Path) -> None:
    """A new defect under an old signature stays new: the entry of the old root cause (id and
    signature) matched its own id in this triage, so it does not also know the other one (seen:
    TVM's composite reductions over no axes returned as 'known' under an empty-axis entry)."""
    old = _cause(features=("empty:in0",))
    fresh = _cause(features=("attribute:noop_with_empty_axes=1",))
    path = _ledger(tmp_path, f"""
[[bug]]
id = "{old.id}"
target = "tvm-onnx"
signature = "{SIG}"
status = "new"
""")
    ledger = load_ledger(path)
    found = ledger.classify([old, fresh])
    assert [c.id for c, _ in found.known] == [old.id] and found.new == [fresh]
    # without its own root cause in the set (its id changed), the entry still knows it by signature
    assert ledger.classify([fresh]).new == []


def test_an_entry_by_error_alone_knows_one_defect_under_every_signature(tmp_path: Path) -> None:
    """One message met through several frames and operators (15 tvm-torch root causes of
    "Binary operators must have the same datatype"; four ov-torch operators dying at one native
    place) is one ledger entry, not one per signature; an entry with a signature stays preferred."""
    binary = "TypeError: Binary operators must have the same datatype for both operands."
    divide = _cause(signature="crash:tvm-onnx:a.py:_divide:TypeError", error=binary + " However, R.divide(...)")
    modulo = _cause(signature="crash:tvm-onnx:b.py:_mod:TypeError", error=binary + " However, R.mod(...)")
    native = _cause(signature="native-crash:tvm-onnx:onnx::Gather:SIGFPE", error="SIGFPE at libx.so+0xe103f6")
    unrelated = _cause(signature="crash:tvm-onnx:b.py:_mod:TypeError", error="TypeError: something else")
    path = _ledger(
        tmp_path,
        """
[[bug]]
target = "tvm-onnx"
error = "Binary operators must have the same datatype"
status = "new"

[[bug]]
target = "tvm-onnx"
error = "SIGFPE at libx.so+0xe103f6"
status = "new"

[[bug]]
target = "tvm-onnx"
signature = "crash:tvm-onnx:b.py:_mod:TypeError"
error = "Binary operators"
status = "not-a-bug"
reason = "modulo of mixed dtypes is outside the domain"
""",
    )
    ledger = load_ledger(path)
    by_error, by_place, by_signature = ledger.entries
    assert ledger.match(divide) is by_error
    assert ledger.match(native) is by_place
    assert ledger.match(modulo) is by_signature  # both match: the one with a signature is more specific
    assert ledger.match(unrelated) is None
    assert not by_error.matches_keys(_cause(target="ov-onnx", signature="crash:ov-onnx:x:E", error=binary))


def test_a_signature_ending_in_a_star_names_every_overload_of_a_converter(tmp_path: Path) -> None:
    """One TVM promotion defect came back as a new root cause under each torch.linspace overload
    (Tensor_Tensor, Scalar_Tensor, Tensor_Scalar): an inconsistency has no error line, so one
    entry names the converter's signature as a prefix."""
    overloads = [
        _cause(signature=f"inconsistent:tvm-onnx:converter=aten.linspace.{o}", features=("every instance",), error="")
        for o in ("Tensor_Tensor", "Scalar_Tensor")
    ]
    other = _cause(signature="inconsistent:tvm-onnx:converter=aten.logspace.Tensor_Tensor", features=("every instance",), error="")
    path = _ledger(
        tmp_path,
        """
[[bug]]
target = "tvm-onnx"
signature = "inconsistent:tvm-onnx:converter=aten.linspace.*"
status = "new"
""",
    )
    ledger = load_ledger(path)
    (entry,) = ledger.entries
    assert all(ledger.match(cause) is entry for cause in overloads)
    assert ledger.match(other) is None
    assert entry.names_signature("inconsistent:tvm-onnx:converter=aten.linspace.default")
    assert not entry.names_signature("inconsistent:tvm-onnx:converter=aten.lin")


# ---- opera triage / opera bugs on a real run --------------------------------------------------


def test_opera_triage_and_bugs_mark_known_and_new_root_causes(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no bugs/ledger.toml here: the first triage runs without a ledger
    corpus = write(tmp_path / "c.jsonl", [fault("raise", k) for k in range(3)] + relus(2, start=5))
    store = tmp_path / "opera.db"
    run = ["run", str(corpus), "-t", "test-faults", "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]
    assert main(run) == 0
    capsys.readouterr()
    assert main(["triage", "--store", str(store), "-o", str(tmp_path / "t0"), "-q", "--no-reproducers"]) == 0
    printed = capsys.readouterr().out.replace(str(tmp_path), "TMP")
    assert "ledger" not in printed and "new" not in printed  # no ledger: nothing asked, nothing said
    causes = {c["target"]: c for c in json.loads((tmp_path / "t0" / "root-causes.json").read_text())}
    assert all(c["ledger"] is None for c in causes.values())
    crash, wrong = causes["test-faults"], causes["test-wrong"]

    # the crash is known by its id, the wrong results by signature + features; one entry is stale
    ledger = _ledger(
        tmp_path,
        f"""
[[bug]]
id = "{crash['id']}"
target = "test-faults"
status = "reported"
url = "{URL}"

[[bug]]
target = "test-faults"
signature = "crash:test-faults:opera/run/targets/testing.py:_inject:ValueError"
status = "new"

[[bug]]
target = "tvm-onnx"
signature = "{SIG}"
status = "new"
""",
    )
    out = tmp_path / "t1"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q", "--no-reproducers", "--ledger", str(ledger)]) == 0
    printed = capsys.readouterr().out
    marked = {c["target"]: c["ledger"] for c in json.loads((out / "root-causes.json").read_text())}
    assert marked == {
        "test-faults": {"known": True, "entry": 1, "id": crash["id"], "status": "reported", "url": URL},
        "test-wrong": {"known": False},
    }
    assert re.search(rf"{crash['id']}\s+3\s+known \(reported: {re.escape(URL)}\)", printed), printed
    assert re.search(rf"{wrong['id']}\s+5\s+new\s+test-wrong", printed), printed  # every instance is wrong there
    assert f"ledger {ledger}: 1 root cause(s) known, 1 new" in printed
    assert f"ledger {ledger}: bug #2, test-faults; signature crash:test-faults:" in printed
    assert "matched no root cause" in printed and "1 entry(ies) of other targets not checked (tvm-onnx)" in printed

    # opera bugs --ledger: a signature is known when an entry names it, or knows every root cause
    # under it (the crash's entry names only its root cause's id); the root-cause view matches fully
    ledger.write_text(
        ledger.read_text()
        + f'\n[[bug]]\ntarget = "test-wrong"\nsignature = "{wrong["signatures"][0]}"\n'
        + f'features = ["{EVERY_INSTANCE}"]\nstatus = "reported"\nurl = "{URL}/2"\n'
    )
    assert main(["bugs", "--store", str(store), "--ledger", str(ledger)]) == 0
    listing = capsys.readouterr().out
    rows = {line.split()[-1]: line.split()[2] for line in listing.splitlines() if re.match(r"^\s+\d+\s", line)}
    assert rows == {crash["signatures"][0]: "known", wrong["signatures"][0]: "known"}, listing
    assert f"ledger: bug #4, reported: {URL}/2" in listing
    assert f"ledger, by root cause: {crash['id']} bug #1 ({crash['id']})" in listing
    assert "(2 known to the ledger" in listing and ", 0 new)" in listing
    assert main(["bugs", "--store", str(store), "--ledger", str(ledger), "--json"]) == 0
    as_json = {b["signature"]: b["ledger"] for b in json.loads(capsys.readouterr().out)}
    assert as_json[crash["signatures"][0]]["known"] is True
    assert [c["id"] for c in as_json[crash["signatures"][0]]["root_causes"]] == [crash["id"]]
    # without the entry that knows the root cause, the same signature is new again
    knowing = ledger.read_text()
    ledger.write_text(knowing.replace(f'id = "{crash["id"]}"', 'id = "rc-0000000000"'))
    assert main(["bugs", "--store", str(store), "--ledger", str(ledger)]) == 0
    listing = capsys.readouterr().out
    rows = {line.split()[-1]: line.split()[2] for line in listing.splitlines() if re.match(r"^\s+\d+\s", line)}
    assert rows[crash["signatures"][0]] == "new", listing
    assert main(["bugs", "--store", str(store), "--ledger", str(ledger), "--json"]) == 0
    as_json = {b["signature"]: b["ledger"] for b in json.loads(capsys.readouterr().out)}
    assert as_json[crash["signatures"][0]]["known"] is False
    assert as_json[wrong["signatures"][0]]["url"] == f"{URL}/2"
    ledger.write_text(knowing)
    assert main(["bugs", "--store", str(store), "--ledger", str(ledger), "--root-causes"]) == 0
    listing = capsys.readouterr().out
    assert f"{crash['id']}" in listing and f"known (reported: {URL})" in listing
    assert f"known (reported: {URL}/2)" in listing and not any(line.endswith("  new") for line in listing.splitlines())
    # without a ledger, opera bugs has no such column
    assert main(["bugs", "--store", str(store)]) == 0
    listing = capsys.readouterr().out.replace(str(tmp_path), "TMP")
    assert "known" not in listing and "new" not in listing


# ---- opera nightly ----------------------------------------------------------------------------

# test -> (ONNX operator, behaviour on night 1 (version 1), behaviour on night 2 (version 2))
PLAN = {
    "abs": ("onnx::Abs", "pass", "raise"),  # a new failure the ledger knows (by signature)
    "exp": ("onnx::Exp", "pass", "raise-type"),  # a new failure nobody knows
    "neg": ("onnx::Neg", "wrong", "pass"),  # known last night, passes after the upgrade
    "relu": ("onnx::Relu", "pass", "pass"),
}
ABS_SIG = "crash:test-drift:opera/run/targets/testing.py:_drift_inject:RuntimeError"
EXP_SIG = "crash:test-drift:opera/run/targets/testing.py:_drift_inject:TypeError"


def _instance(test: str, api: str, k: int) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api=api,
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) + k,),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test=test),
    )


def _night(tmp_path: Path, monkeypatch, capsys, night: int, store: Path, *extra: str) -> tuple[int, str, Path]:
    behaviour = {test: plan[night] for test, plan in PLAN.items()}
    drift = tmp_path / f"drift{night}.json"
    drift.write_text(json.dumps({"version": str(night), "behaviour": behaviour}))
    monkeypatch.setenv("OPERA_TEST_DRIFT", str(drift))
    corpus = tmp_path / "corpus.jsonl"
    if not corpus.exists():
        write(corpus, [_instance(t, api, k) for k, (t, (api, _, _)) in enumerate(PLAN.items())])
    out = store.parent / f"night{night}"
    argv = ["nightly", str(corpus), "-t", "test-drift", "--store", str(store), "--budget", "10m"]
    code = main([*argv, "--workers", "1", "-q", "-o", str(out), *extra])
    captured = capsys.readouterr()
    return code, captured.err + captured.out, out


def _nightly_ledger(tmp_path: Path, *more: str) -> Path:
    entries = [
        f'[[bug]]\ntarget = "test-drift"\nsignature = "{ABS_SIG}"\nstatus = "reported"\nurl = "{URL}"\n',
        f'[[bug]]\ntarget = "test-drift"\nsignature = "inconsistent:test-drift:onnx::Neg"\nstatus = "reported"\nurl = "{URL}/neg"\n',
        '[[bug]]\ntarget = "test-drift"\nsignature = "crash:test-drift:nowhere.py:f:KeyError"\nstatus = "new"\n',
        *more,
    ]
    return _ledger(tmp_path, "\n".join(entries), f"ledger{len(more)}.toml")


def test_nightly_reports_known_failures_apart_and_flags_fixed_upstream(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # no default ledger: the runs without --ledger have none
    ledger = _nightly_ledger(tmp_path)
    night1 = tmp_path / "n1"
    night1.mkdir()
    store = night1 / "opera.db"
    # night 1: the only failure (Neg, wrong) is in the ledger: a first night that is green
    code, text, _ = _night(tmp_path, monkeypatch, capsys, 1, store, "--ledger", str(ledger))
    assert code == 0, text
    assert f"known (reported: {URL}/neg): 1 test(s) of onnx::Neg: not run -> inconsistent" in text
    assert "no new failures (1 known failure(s) in the ledger, not counted)" in text

    # the same night 2 three times, from copies of the store after night 1
    stores = {}
    for name in ("ledger", "full", "none"):
        (tmp_path / name).mkdir()
        stores[name] = tmp_path / name / "opera.db"
        shutil.copy(store, stores[name])

    # night 2 with the ledger: Abs is known, Exp is new (exit 1), Neg passes after 1 -> 2
    code, text, out = _night(tmp_path, monkeypatch, capsys, 2, stores["ledger"], "--ledger", str(ledger))
    assert code == 1, text
    assert f"known (reported: {URL}): 1 test(s) of onnx::Abs: pass -> crash ({ABS_SIG})" in text
    assert f"new failure: 1 test(s) of onnx::Exp: pass -> crash ({EXP_SIG})" in text
    assert "new failure: 1 test(s) of onnx::Abs" not in text
    assert "1 new failure(s): 1 in tests that ran without failing last time" in text
    assert "1 known failure(s) in the ledger, not counted" in text
    fixed = [line for line in text.splitlines() if "fixed upstream?" in line]
    assert len(fixed) == 1 and "bug #2" in fixed[0] and f"{URL}/neg" in fixed[0] and "test-drift 1 -> 2" in fixed[0]
    assert "bug #3, test-drift; signature crash:test-drift:nowhere.py:f:KeyError: matched no failure tonight" in text
    assert text.rstrip().endswith(str(out / "report.html"))
    page = (out / "report.html").read_text()
    section = page[page.index('id="known-failures"') :]
    assert "onnx::Abs" in section[: section.index("</table>")] and URL in section[: section.index("</table>")]
    new_table = page[page.index('id="new-failures"') :]
    assert "onnx::Exp" in new_table[: new_table.index("</table>")]
    assert "onnx::Abs" not in new_table[: new_table.index("</table>")]
    upstream = page[page.index('id="fixed-upstream"') :]
    assert "bug #2" in upstream[: upstream.index("</table>")] and "test-drift 1 -&gt; 2" in upstream
    junit = (out / "junit.xml").read_text()
    assert f'message="known (reported: {URL}): {ABS_SIG}"' in junit
    assert f'message="new failure: {EXP_SIG}"' in junit

    # the ledger knows Exp too: nothing new, exit 0
    exp = f'[[bug]]\ntarget = "test-drift"\nsignature = "{EXP_SIG}"\nstatus = "new"\n'
    code, text, _ = _night(tmp_path, monkeypatch, capsys, 2, stores["full"], "--ledger", str(_nightly_ledger(tmp_path, exp)))
    assert code == 0, text
    assert "no new failures (2 known failure(s) in the ledger, not counted)" in text

    # no ledger: the nightly as before, both crashes are new and nothing says "fixed upstream?"
    code, text, out = _night(tmp_path, monkeypatch, capsys, 2, stores["none"])
    assert code == 1, text
    assert "2 new failure(s): 2 in tests that ran without failing last time" in text
    said = text.replace(str(tmp_path), "TMP")  # the test's own folder is named after it
    assert "known" not in said and "fixed upstream?" not in said and "ledger" not in said
    assert 'id="known-failures"' not in (out / "report.html").read_text()


def test_fixed_upstream_needs_an_upgrade_of_the_target_and_every_rerun_test_passing(tmp_path: Path) -> None:
    from opera.nightly import ChangeKind, compare_results
    from opera.nightly.known import match_night
    from opera.outcomes import Outcome, Stage, TestResult

    sig = "inconsistent:t:onnx::Neg"
    ledger = load_ledger(_ledger(tmp_path, f'[[bug]]\ntarget = "t"\nsignature = "{sig}"\nstatus = "reported"\nurl = "{URL}"\n'))

    def result(iid: str, outcome: Outcome) -> TestResult:
        return TestResult(iid, "onnx::Neg", "t", outcome, Stage.RUN, signature=sig if outcome is Outcome.INCONSISTENT else None)

    before = [result("x", Outcome.INCONSISTENT), result("y", Outcome.INCONSISTENT)]

    def flagged(tonight: list[TestResult], versions: dict[str, str]) -> list[str]:
        cmp = compare_results(
            "t", 2, tonight, previous_run_id=1, previous=before,
            versions={"c": "1", "opera": "0.1"} | versions, previous_versions={"c": "1", "opera": "0.1"},
        )
        known = match_night(ledger, cmp, tonight, before, {})
        return [f"{f.entry.name} {f.passing} {'; '.join(f.version_changes)}" for f in known.fixed_upstream]

    passing = [result("x", Outcome.PASS), result("y", Outcome.PASS)]
    assert flagged(passing, {"c": "2"}) == ["bug #1 2 c 1 -> 2"]
    assert flagged(passing[:1], {"c": "2"}) == ["bug #1 1 c 1 -> 2"]  # y not run tonight: x says it
    assert flagged(passing, {}) == []  # no upgrade: not "fixed upstream"
    assert flagged(passing, {"opera": "0.2"}) == []  # a new Opera is not an upgrade of the target
    assert flagged([result("x", Outcome.PASS), result("y", Outcome.UNSUPPORTED)], {"c": "2"}) == []
    assert flagged([result("x", Outcome.PASS), result("y", Outcome.INCONSISTENT)], {"c": "2"}) == []  # still known
    assert flagged([result("z", Outcome.PASS)], {"c": "2"}) == []  # none of its tests ran tonight
    # a new failure of a known root cause is marked in place; an unknown one is not
    tonight = [result("x", Outcome.INCONSISTENT), TestResult("w", "onnx::Abs", "t", Outcome.CRASH, Stage.CONVERT, signature="crash:t:a.py:f:E")]
    cmp = compare_results("t", 2, tonight, previous_run_id=1, previous=[result("x", Outcome.PASS)])
    match_night(ledger, cmp, tonight, [], {})
    assert [(c.instance_id, c.known is not None) for c in cmp.of(ChangeKind.NEW_FAILURE)] == [("w", False), ("x", True)]
    assert [c.instance_id for c in cmp.new_failures] == ["w"] and [c.instance_id for c in cmp.known_failures] == ["x"]


def test_an_entrys_error_copied_from_the_raw_message_matches_the_normalized_line(tmp_path) -> None:
    """A judge wrote rc-732d30989b's error with the message's own '-1'; the root cause's error line
    reads 'N' there, so the entry matched nothing and a judged defect came back as new."""
    cause = _cause(
        "ov-keras", "crash:ov-keras:src/core/shape_inference/include/reshape_shape_inference.hpp:RuntimeError",
        ("empty",), "RuntimeError: Dim size cannot be less than N",
    )  # fmt: skip
    path = tmp_path / "ledger.toml"
    path.write_text(
        '[[bug]]\ntarget = "ov-keras"\n'
        'signature = "crash:ov-keras:src/core/shape_inference/include/reshape_shape_inference.hpp:RuntimeError"\n'
        'error = "Dim size cannot be less than -1"\nstatus = "new"\n',
        encoding="utf-8",
    )
    entry = load_ledger(path).match(cause)
    assert entry is not None and entry.error == "Dim size cannot be less than -1"
