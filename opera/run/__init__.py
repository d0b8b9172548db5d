"""The run stage: a test goes in, an outcome comes out.

``runner`` drives a run (order, budget, store, resume), ``executors`` decide where each test runs
(local worker processes or a Ray cluster), ``execution`` runs one test in isolation (build the
single-operator model, convert, compile, execute) and ``targets`` holds one module per compiler
frontend. What the outcome *means* is decided in :mod:`opera.verdict`.
"""
