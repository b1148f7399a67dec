"""The daemon (gschedd): carries out what the core decides, on the real clock.

``loop``        the loop: takes requests in, schedules, carries the plan out, commits (nothing imports it)
``intake``      reads the spool's incoming files at the trust boundary (parsing: gridsched.protocol.requests)
``handlers/``   one module per request kind, matched exhaustively on the typed request; each sees a narrow
                context (``handlers/context.py``) and returns what it changed
``actions``     the daemon's work the handlers may ask for, carried out on the daemon
``table``       the job table: the live jobs, the queue, their rows (the only place job rows change)
``apply``       the snapshot for the core, and what each decision of a plan does
``outcome``     how a job's segment ended: requeued or its end state
``executor``    starting and watching shepherds (``Processes``), or nothing (``Stub``, for tests)
``launch``      the shepherd: runs a job pinned, as its owner, and records how it ended
``jobfiles``    a job's directory, made by descriptor, never through a path a user can change
``recover``     finds jobs again after a restart
``arrays``, ``split``, ``reservations``, ``tree``  arrays, splittable jobs, reservations, job trees
"""
