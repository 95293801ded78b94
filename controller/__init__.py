"""GOR, the global controller: route programming and P4Runtime sessions with every
switch, telemetry, congestion alarms, elephant detection, safe path planning, the
source-port reroute loop and the live prompt (docs/gor.md)."""
