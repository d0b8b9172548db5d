"""Standalone reproducers: ``write`` turns a failing test into a script that needs only the library
and the compiler; ``verify`` re-runs those scripts and records whether each still shows its failure."""
