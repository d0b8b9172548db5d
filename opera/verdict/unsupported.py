"""Which exceptions mean "the frontend does not support this" (docs/design.md, Verdict).

An unsupported operator or feature is recorded as ``unsupported``, not as a bug. What counts is
data, not code: regular expressions searched in ``"<module>.<ExceptionType>: <message>"`` of the
exception and of every exception in its ``__cause__``/``__context__`` chain. Each target declares
its own (``Target.unsupported_patterns``, in its module, collected along its class hierarchy); a
TOML file adds to them: ``[common]`` (every target), ``[compiler.<name>]`` (every target of one
compiler) and ``[target."<name>"]``. The default file, ``unsupported.toml`` beside this module,
holds the common ones; ``opera run --unsupported-config FILE`` uses FILE instead of it, and
``target_patterns = false`` at the top of a file leaves the targets' own patterns out (every
failure is then judged as a crash or an inconsistency).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from opera.config import read_config
from opera.errors import OperaError

__all__ = ["DEFAULT_UNSUPPORTED_PATH", "UnsupportedPatterns", "exception_text", "load_unsupported"]

DEFAULT_UNSUPPORTED_PATH = Path(__file__).with_name("unsupported.toml")


def exception_text(exc: BaseException, limit: int = 4000) -> str:
    """``module.Type: message`` for the exception and its causes, one per line."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 8:
        seen.add(id(current))
        kind = type(current)
        parts.append(f"{kind.__module__}.{kind.__qualname__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)[:limit]


@dataclass(frozen=True)
class UnsupportedPatterns:
    by_target: dict[str, tuple[re.Pattern[str], ...]]
    by_compiler: dict[str, tuple[re.Pattern[str], ...]]
    common: tuple[re.Pattern[str], ...]

    def patterns_for(self, target: str, compiler: str = "") -> tuple[re.Pattern[str], ...]:
        return self.common + self.by_compiler.get(compiler, ()) + self.by_target.get(target, ())

    def match(self, exc: BaseException, target: str, compiler: str = "") -> str | None:
        """The pattern that says ``exc`` means "unsupported" on ``target``, or None."""
        text = exception_text(exc)
        for pattern in self.patterns_for(target, compiler):
            if pattern.search(text):
                return pattern.pattern
        return None


def _compile_list(where: str, table: object) -> tuple[re.Pattern[str], ...]:
    if not isinstance(table, dict) or set(table) - {"patterns"}:
        raise OperaError(f"unsupported config: [{where}] must hold only `patterns = [...]`")
    patterns = table.get("patterns", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise OperaError(f"unsupported config: {where}.patterns must be a list of strings")
    compiled = []
    for text in patterns:
        try:
            compiled.append(re.compile(text))
        except re.error as exc:
            raise OperaError(
                f"unsupported config: bad regular expression in {where}: {text!r} ({exc})"
            ) from None
    return tuple(compiled)


def _declared_patterns() -> dict[str, tuple[re.Pattern[str], ...]]:
    """Each registered target's own patterns (``Target.declared_unsupported_patterns``)."""
    from opera.run.targets import target_classes

    return {
        cls.name: _compile_list(f"target {cls.name} (its unsupported_patterns)", {"patterns": list(patterns)})
        for cls in target_classes()
        if (patterns := cls.declared_unsupported_patterns())
    }


def load_unsupported(path: str | Path | None = None) -> UnsupportedPatterns:
    config_path, data = read_config(
        path, DEFAULT_UNSUPPORTED_PATH, "unsupported config", {"common", "compiler", "target", "target_patterns"}
    )
    use_declared = data.get("target_patterns", True)
    if not isinstance(use_declared, bool):
        raise OperaError(f"unsupported config {config_path}: target_patterns must be true or false")
    by_target = _declared_patterns() if use_declared else {}
    for name, table in data.get("target", {}).items():
        by_target[name] = by_target.get(name, ()) + _compile_list(f"target.{name}", table)
    return UnsupportedPatterns(
        by_target=by_target,
        by_compiler={k: _compile_list(f"compiler.{k}", v) for k, v in data.get("compiler", {}).items()},
        common=_compile_list("common", data.get("common", {})),
    )
