"""The check suite's machinery: the `Check` base class (its lifecycle: timeout, timing, exception → status),
the typed options a command hands its checks, the --plant table, and the runner that builds the `Report`.
The checks themselves live in trainready/checks/, one module per check."""
