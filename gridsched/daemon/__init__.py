"""The daemon (gschedd): carries out what the core decides, on the real clock.

``main`` runs the loop, ``requests`` reads the spool's incoming files,
``launch`` starts a job under its shepherd, ``procs`` signals process trees,
``recover`` finds jobs again after a restart.
"""
