"""Migration between workq and eventq, both ways (workq command logs in and out).

* ``mapping``  - pure: a replayed workq job -> an ``Import`` command, an eventq job ->
  a workq job (times, LEASED -> PENDING, what cannot round-trip)
* ``importer`` - ``eventq import-cmdlog``: read + replay, publish, wait, report
* ``exporter`` - ``eventq export-cmdlog``: state log -> a workq command log
* ``kafka_io`` - the producer, the server's committed offsets, a state-log tail
* ``progress`` - the progress bar on stderr
* ``cli``      - ``register(...)`` for eventq's command line, and ``main``
"""
