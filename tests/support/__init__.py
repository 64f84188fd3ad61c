"""Builders the tests and perf/ share: generated projects in local git repos (chain, calc),
a loopback OCI registry (registry), a test-only build system (make_system)."""
