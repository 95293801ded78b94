"""Importers: other simulators' workload files as testbed traces.

``python -m tccl.importers FORMAT FILE -o traces/NAME.yaml`` (docs/tccl.md, "Importers"):
one module per format -- `simai` (SimAI / AICB text workloads), `aicb_csv` (AICB's
per-collective CSV), `chakra` (MLCommons Chakra execution traces) -- each with a reader
that turns the file into a `tccl.trace.Trace` for a given fabric and a writer (the
tests' fixtures, and a way to hand a testbed job back to those tools). `common` holds
what they share: the fabric's shape and its parallel groups, size scaling, the
summary of what was imported.
"""
