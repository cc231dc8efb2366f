"""The pipeline schedules' bubble as the simulator predicts it, past this machine.

For each schedule (gpipe, 1f1b, interleaved with V = 2, zb-h1) and pipeline
sizes P up to 64 with M up to 512 microbatches, prints the bubble that
`cleave schedule` simulates (the same simulator that builds and verifies a
compiled pipeline's action lists) beside the bubble each schedule's paper
derives for uniform stages, and their ratio. Stages cost F = I = W = 1 (a
backward of 2), divided by V for the interleaved schedule's smaller stages.

    .venv/bin/python bench/pipeline_bubble.py [--cleave build/bin/cleave]

The measured bubble of a running pipeline (from each rank's timeline) is
not here yet: pipeline training does not run yet.
"""

import argparse
import re
import subprocess


def simulated(cleave, schedule, P, M, V, costs):
    out = subprocess.run(
        [cleave, "schedule", "--schedule", schedule, "--pp", str(P), "--microbatches", str(M),
         "--virtual-stages", str(V), "--costs", ",".join(map(str, costs))],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^bubble: ([0-9.]+)", out, re.M).group(1))


def theory(schedule, P, M, V, costs):
    F, I, W = costs
    if schedule == "interleaved":
        return (P - 1) / (V * M + P - 1)
    if schedule == "zb-h1":
        return (P - 1) * (F + I - W) / (M * (F + I + W) + (P - 1) * (F + I - W))
    return (P - 1) / (M + P - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleave", default="build/bin/cleave")
    args = parser.parse_args()
    print(f"{'schedule':<12} {'P':>3} {'M':>4} {'simulated':>10} {'theory':>8} {'ratio':>6}")
    for schedule in ("gpipe", "1f1b", "interleaved", "zb-h1"):
        V = 2 if schedule == "interleaved" else 1
        costs = (1 / V, 1 / V, 1 / V)
        for P in (4, 8, 16, 32, 64):
            for M in (P, 4 * P, 512):
                if M < P or M > 512:
                    continue
                got = simulated(args.cleave, schedule, P, M, V, costs)
                want = theory(schedule, P, M, V, costs)
                print(f"{schedule:<12} {P:>3} {M:>4} {got:>10.4f} {want:>8.4f} {got / want:>6.3f}")


if __name__ == "__main__":
    main()
