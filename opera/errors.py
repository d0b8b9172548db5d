"""User-facing errors: the CLI prints the message on one line and exits with code 2."""

from __future__ import annotations


class OperaError(Exception):
    """Bad input or environment the user can fix; never a bug in Opera or in a compiler."""


class CorpusError(OperaError):
    """A corpus file that is missing, unreadable or malformed."""


class HarvestError(OperaError):
    """A harvest that cannot start (unknown source, pytest failing to start, ...)."""
