"""``python -m topo.run``: launch the fabric and leave the user at a prompt (`make run`).

Compiles the P4 program (or reuses the last build), starts the fabric, programs it,
configures the hosts, then runs Mininet's CLI -- which reads its commands from a pipe
or file as well (``echo pingall | make run``). Leaving the CLI, Ctrl-C, SIGTERM or an
error tear everything down. A bad spec gives one error and starts nothing.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType

from mininet.cli import CLI
from mininet.log import setLogLevel

from p4sim.compiler import CompileError
from topo.net import Fabric, FabricError
from topo.nodes import BACKENDS
from topo.pipeline import PROGRAM
from topo.spec import SpecError, load_spec, replace

DEFAULT_FABRIC = "topo/fabrics/default.yaml"


class FabricCLI(CLI):
    """Mininet's CLI plus commands that show the fabric's addressing plan."""

    prompt = "astral> "

    def __init__(self, fabric: Fabric, **kwargs) -> None:
        self.fabric = fabric
        super().__init__(fabric.net, **kwargs)

    def do_nics(self, _line: str) -> None:
        """List every NIC: server, rail, address, MAC, leaf and leaf port."""
        self.stdout.write(f"{'server':<8} {'rail':>4} {'ip':<15} {'mac':<18} {'leaf':<8} port\n")
        for nic in self.fabric.plan.nics():
            self.stdout.write(f"{nic.server:<8} {nic.rail:>4} {nic.ip:<15} {nic.mac:<18} "
                              f"{nic.leaf:<8} {nic.leaf_port}\n")

    def do_switches(self, _line: str) -> None:
        """List every switch: role, id, MAC, P4Runtime address and ECMP salt."""
        self.stdout.write(f"{'switch':<8} {'role':<6} {'id':>3} {'mac':<18} {'p4runtime':<16} salt\n")
        for sw in self.fabric.plan.switches:
            self.stdout.write(f"{sw.name:<8} {sw.role:<6} {sw.switch_id:>3} {sw.mac:<18} "
                              f"{sw.grpc_address:<16} 0x{sw.salt:08x}\n")


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topo.run", description=__doc__.splitlines()[0])
    parser.add_argument("--fabric", default=DEFAULT_FABRIC, help=f"fabric spec (default {DEFAULT_FABRIC})")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="p4sim",
                        help="switch implementation (default p4sim)")
    parser.add_argument("--pcap", action="store_true", help="capture every switch port (build/run/pcap)")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.fabric)
        if args.pcap:
            spec = replace(spec, pcap=True)
        fabric = Fabric(spec, backend=args.backend)
    except (SpecError, FabricError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    setLogLevel("info")
    started = time.monotonic()
    try:
        fabric.start()
        first, last = fabric.plan.servers[0], fabric.plan.servers[-1]
        print(f"*** Fabric '{spec.name}' ready in {time.monotonic() - started:.1f} s: "
              f"{len(fabric.plan.servers)} servers x {spec.rails} rails, {spec.leaves} leaves, "
              f"{spec.spines} spines ({args.backend}, {PROGRAM.name}, ECMP {spec.ecmp_hash}).\n"
              f"*** Try: nics, switches, pingall, "
              f"{first.name} ping -c1 -I {first.nics[0].ip} {last.nics[-1].ip}", flush=True)
        FabricCLI(fabric)
    except (FabricError, CompileError, RuntimeError) as e:
        # Bring-up failures (a switch that did not start, a rejected write, a compile
        # error) end with their message; the fabric is already torn down by then.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C during start-up (the prompt handles its own)
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        fabric.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
