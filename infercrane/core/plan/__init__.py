"""What a change does: the rollout (waves per endpoint, and the engine runs that carry them), the workload verdicts' inputs, the model cache, the one vocabulary of actions. Pure core."""
