"""What the commands, the daemon and the Python API share: the requests and the job type at the
boundary, the spool, the job table, the view of the queue, the configuration.
"""
