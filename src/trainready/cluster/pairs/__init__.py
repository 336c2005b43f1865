"""The pairs search (`trainready cluster pairs`): the round-robin pairing of nodes, its run and its state."""
