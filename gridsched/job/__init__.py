"""Programs that run inside a job: srun/mpirun, the sub-tasks of a split job, grun's job side, the
executor's worker, and the environment a job sees.
"""
