"""GOR, the global controller: route programming over P4Runtime (`routes`), and later
telemetry, congestion alarms, elephant detection and rerouting."""
