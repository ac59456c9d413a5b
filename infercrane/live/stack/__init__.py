"""One stack's checks before a run: its context (:mod:`.context`), the preflight
(:mod:`.preflight`) and routing membership (:mod:`.membership`)."""
