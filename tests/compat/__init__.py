"""Side by side with the systems users come from (a package: its Slurm is started once for it)."""
