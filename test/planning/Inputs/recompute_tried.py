"""Reads cleave plan --json's output and checks the planner's rule for
recomputation: a layout is tried with --recompute selective or full only
where the same layout without it compiles and does not fit. Prints whether
the rule holds and whether a pipeline layout was among those tried."""

import json
import sys

layouts = json.load(open(sys.argv[1]))["layouts"]
plain = {(l["mesh"], l["zero"], l["microbatches"], l["schedule"]): l
         for l in layouts if l["recompute"] == "none"}
tried = [l for l in layouts if l["recompute"] != "none"]
broken = []
for l in tried:
    without = plain.get((l["mesh"], l["zero"], l["microbatches"], l["schedule"]))
    if without is None or "error" in without or without["fits"]:
        broken.append(l["flags"])
print("rule holds" if not broken else "rule broken for: " + "; ".join(broken[:3]))
print("a pipeline tried with recomputation:",
      "yes" if any(l["mesh"].startswith("pp=") for l in tried) else "no")
