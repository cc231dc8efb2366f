"""The predicted peak of a rank that runs several programs (a rank of an
interleaved pipeline runs its stages'): the sum of their plan.json
predicted peaks, each one's scratch and products' scratchpad left out but
the largest, since the kernels of a process share them, grown to the
largest call's (docs/formats.md, memory)."""

SHARED = ("scratch_bytes", "product_scratchpad_bytes")


def rank_peak(memories):
    """`memories`: the plan.json `memory` objects of the rank's programs."""
    own = sum(m["predicted_peak_bytes"] - sum(m[k] for k in SHARED) for m in memories)
    return own + sum(max(m[k] for m in memories) for k in SHARED)
