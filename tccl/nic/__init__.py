"""The native RoCE NIC: the agents' transport in C (tccl/qp.py, dcqcn.py and the NIC
part of engine.py, which stay the reference), compiled at first use (`build`)."""
