"""`trainready compare`: judge a new image's record against the reference's (the upgrade gate)."""
