"""What runs the whole testbed at once: the `make run` launcher (`testbed.run`).

It sits above the parts it joins -- the fabric (`topo`) and GOR (`controller`) -- so
neither of them imports the other: topo brings up switches and hosts and takes the
programming step it is given, the controller programs and steers a fabric it is given."""
