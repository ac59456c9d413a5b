"""What the engines say of themselves: the serving evidence of a ready replica (:mod:`.served`;
where it answers, :mod:`.slices`; how it is asked, :mod:`.asking`; the key, :mod:`.worker_key`;
in words, :mod:`.said`), a canary's counts from its pods (:mod:`.canary`) or Prometheus
(:mod:`.prometheus`) over its bake (:mod:`.baking`), all through one HTTP edge (:mod:`.edge`)."""
