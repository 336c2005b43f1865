"""`trainready plan`: memory, compute and checkpoint arithmetic for a pretraining run (Megatron/ZeRO rules)."""
