"""Fault plants of the fleet run (`--plant cluster.*`), read by the tasks on the nodes: a test, never evidence."""
