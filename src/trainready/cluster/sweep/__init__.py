"""`trainready cluster sweep`: the node acceptance again and again on idle nodes, at low priority, with verdicts
that need a failure confirmed before a drain (docs/cluster.md "The sweep")."""
