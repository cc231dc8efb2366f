"""The predicted peak of a rank that runs several programs (a rank of an
interleaved pipeline runs its stages'): the sum of their plan.json
predicted peaks, each one's scratch left out but the largest, since a
kernel's scratch is released after its call (docs/formats.md, memory)."""


def rank_peak(memories):
    """`memories`: the plan.json `memory` objects of the rank's programs."""
    scratch = max(m["scratch_bytes"] for m in memories)
    return sum(m["predicted_peak_bytes"] - m["scratch_bytes"] for m in memories) + scratch
