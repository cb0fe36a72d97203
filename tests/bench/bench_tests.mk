# Tests of the benchmark's own tools (scripts run by `make test` on the host).
HOST_SCRIPTS += $(TOP)/tests/bench/steady-busy
