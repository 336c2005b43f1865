"""Numerical references the compute checks compare against: rounding-error bounds of a matmul against
float64, and the SDPA / AdamW kernel cross-checks of the train-step check."""
