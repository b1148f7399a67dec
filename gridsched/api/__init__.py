"""The Python API: :mod:`gridsched.api.client` (jobs without the commands) and
:mod:`gridsched.api.executor` (calls as jobs, here or on Slurm).
"""
