"""Checks of the emulated fabric against published models no one here wrote (issue 26):
DCQCN's reaction to one CNP (Zhu et al., SIGCOMM 2015, section 3), PFC's per-ingress-port
sharing (section 2), each measured on a small fabric of p4sim switches and real agents
and printed beside the reference value. `reference` holds the published models,
`marking` switches the fabric's ECN marking over P4Runtime, `runs` the measuring runs;
docs/validation.md has the figures, `bench/bench_validity.py` measures them again.
"""
