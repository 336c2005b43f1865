"""What runs on a node inside a fleet run: the node task (the acceptance suite), the cross-node task (clock,
storage, the cross-node collective and its blame), the pair task of the pairs search; the run folder's layout and
the progress file each task writes."""
