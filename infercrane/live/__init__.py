"""The live cluster, through lightkube only (never Pulumi): the one client factory, the preflight,
readiness and deletion waits, inspect, doctor and takeover."""
