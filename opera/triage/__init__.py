"""From failures to bug reports: root causes (``root_causes``: what separates the failing
instances of a signature from the passing ones, and which signatures are one defect), reduction
(``reduce``: the smallest instance that still fails the same way), and the upstream-ready reports
``opera triage`` writes."""
