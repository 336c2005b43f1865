"""Host settings (sysctls, ulimits, THP, GPU modes, InfiniBand ports): the known-bad rules, the spec's pins,
and the fleet's host-settings drift against the reference node.  Reading them is manifest/hostset.py; the
node check is checks/host.py."""
