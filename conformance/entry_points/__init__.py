"""The entry points: the ``conformance`` command (:mod:`.cli`, with :mod:`.check` and :mod:`.replay`)
and the pytest plugin entry point (:mod:`.plugin`, ``pytest11: conformance``)."""
