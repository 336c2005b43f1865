"""`trainready selftest`: plant every fault the instrument claims to catch, one at a time, here."""
