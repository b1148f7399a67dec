"""This host as it is: its topology, its devices and their nodes, what it offers (read from sysfs,
/dev and nvidia-smi).
"""
