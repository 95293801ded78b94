"""p4sim's P4Runtime server: ``server.RuntimeServer`` serves ``p4.v1.P4Runtime`` (and the
``p4sim.QueueControl`` service) for one switch device. See docs/runtime.md."""
