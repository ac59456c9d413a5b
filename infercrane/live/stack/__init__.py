"""One stack's checks before a run: its context (:mod:`.context`), the preflight
(:mod:`.preflight`) and what runs now, for the rollout planner (:mod:`.running`)."""
