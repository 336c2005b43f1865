"""The fleet verdict: per-node records against the reference node and the fleet's own spread (robust
statistics), the drain guard (how many nodes one run may drain), the text rendering, and synthetic node records
for the verdict's tests and benchmarks."""
