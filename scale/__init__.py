"""A flow-level model of the fabric at 1k-100k GPUs, built on the testbed's own code:
the addressing plan and hash model (`topo`), the agents' ring orders and port planner
(`tccl`), GOR's demand estimator and placement (`controller`), the demo's
configurations and step costs (`experiments`). See docs/scale.md."""
