"""The fabric judged against the spec's [fabric] (spec/fabric.py): pure functions of `FabricFacts`."""
