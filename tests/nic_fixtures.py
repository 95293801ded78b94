"""The two transport engines, for tests that run against both: the Python reference
(tccl/qp.py, dcqcn.py) and the native NIC's C state machines (tccl/nic/qp.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tccl import dcqcn, qp

ENGINES = ("python", "native")


def transport_engine(name: str) -> SimpleNamespace:
    """Requester, Responder and DcqcnRate of engine ``name``."""
    if name == "native":
        from tccl.nic import qp as native
        return SimpleNamespace(name=name, Requester=native.Requester, Responder=native.Responder,
                               DcqcnRate=native.DcqcnRate)
    return SimpleNamespace(name=name, Requester=qp.Requester, Responder=qp.Responder, DcqcnRate=dcqcn.DcqcnRate)


@pytest.fixture(params=ENGINES)
def transport(request: pytest.FixtureRequest) -> SimpleNamespace:
    return transport_engine(request.param)
