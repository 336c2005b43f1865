"""The resume-equivalence protocol: A (0→N) vs B (0→K, save) + fresh C (load K, K→N)."""
