"""Inspection of a testbed run: what the captures say happened on the wire.

`python -m insight RUN_DIR` reads every switch port's pcap of a run, rebuilds the
flows (5-tuple, QPN, packets, bytes, PSN gaps and retransmits, CE marks, CNPs) and the
switches and ports each one crossed, bins every link's load over time, cross-checks
the TCCL agents' flow records and the hash model's predicted paths, and plots it all
(docs/inspection.md).
"""
