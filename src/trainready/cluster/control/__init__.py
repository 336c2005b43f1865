"""Slurm and the control plane: sbatch/srun/scontrol/squeue wrappers, node availability, controller outages,
the collector's polling, the Pyxis launcher and the image each node ran, and staging trainready onto the nodes."""
