"""The fabric: spec (YAML), addressing plan, ECMP hash model, Mininet topology, switch
nodes and bring-up. `spec`, `addressing` and `hashmodel` are pure (no root, no
processes); `mininet_topo` only describes; `nodes` and `net` start things.
`freeports` (free local TCP port ranges for a fabric's gRPC) and `namespaces` (network
namespaces and raw sockets inside them, for tests and benchmarks) are the helpers
that everything running a fabric or sending frames shares."""
