"""One module per CLI verb (see opera/cli.py)."""
