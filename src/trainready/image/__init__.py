"""The image path before `cluster run`: import a registry image pinned by digest into one checksummed squashfs
(enroot), record it, distribute that one file to every node through Slurm, and check every node's copy."""
