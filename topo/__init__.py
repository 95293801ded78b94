"""The fabric: spec (YAML), addressing plan, ECMP hash model, Mininet topology, switch
nodes and bring-up. `spec`, `addressing` and `hashmodel` are pure (no root, no
processes); `mininet_topo` only describes; `nodes` and `net` start things."""
