"""What a workload's status says: one replica's verdict (:mod:`.verdicts`), the fleet's readiness
wait (:mod:`.readiness`, its lines :mod:`.progress`), the deletion wait (:mod:`.gone`) and the
warnings worth showing (:mod:`.warnings`)."""
