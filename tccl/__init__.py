"""TCCL host agents: RoCEv2 transport over raw sockets, DCQCN, collectives, port planning."""
