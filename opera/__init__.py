"""Opera: test DL-compiler frontends with operator instances migrated from DL library test suites."""

from __future__ import annotations

from opera.corpus import CorpusReader, CorpusWriter, read_corpus, write_corpus
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Origin, Source, Tolerance

__version__ = "0.1.0"

__all__ = [
    "CorpusReader",
    "CorpusWriter",
    "InstanceKind",
    "OperaError",
    "OperatorInstance",
    "Origin",
    "Source",
    "Tolerance",
    "__version__",
    "read_corpus",
    "write_corpus",
]
