"""The check the background collectives' trace tests share: in a run's
trace (`cleave run --trace`, read by chrome_trace.load), each microbatch's
started collectives of each kind are "KIND AXIS" spans on a rank's
"communication (background)" track, with plan.json's bytes in its order,
inside the microbatch's forward and backward, each waited for once there
("wait for background KIND" on the communication track); and each step's
--log-json figures are the spans': its communication seconds its collective
spans and background spans, its exposed communication the collective spans
and the waits."""
import chrome_trace
from expectations import expect


def check_started_collectives(trace, metrics, ranks, microbatches, axis, started):
    """`started`: each kind's (all_gather, reduce_scatter, all_reduce) bytes
    in one microbatch's call, as plan.json lists them, over mesh axis `axis`;
    `microbatches` a step's."""
    per_call = sum(len(b) for b in started.values())
    for rank in range(ranks):
        compute = trace.track(rank, "compute")
        steps = [s for s in compute if s.name.startswith("step ")]
        phases = [s for s in compute if s.name in ("forward", "backward")]
        comm = trace.track(rank, "communication")
        waits = [s for s in comm if s.name.startswith("wait for background ")]
        calls = [s for s in comm if s not in waits and s.name not in ("wait", "transfer")]
        background = trace.track(rank, "communication (background)")
        names = {f"{kind} {axis}" for kind in started}
        expect({s.name for s in background} == names,
               f"rank {rank}: background spans {sorted({s.name for s in background})}")
        for step in steps:
            n = step.args["step"]
            mine = [p for p in phases if step.holds(p, chrome_trace.NS)]
            for k in range(microbatches):
                first, last = mine[2 * k], mine[2 * k + 1]

                def inside(spans):
                    return [s for s in spans if first.ts - chrome_trace.NS <= s.ts and
                            s.end <= last.end + chrome_trace.NS]
                for kind, planned in started.items():
                    ran = [s.args.get("buffer_bytes") for s in inside(background)
                           if s.name == f"{kind} {axis}"]
                    expect(ran == planned,
                           f"rank {rank} step {n} microbatch {k}: background {kind}s of {ran} "
                           f"bytes, plan.json's {planned}")
                    waited = [w for w in inside(waits)
                              if w.name == f"wait for background {kind}"]
                    expect(len(waited) == len(planned),
                           f"rank {rank} step {n} microbatch {k}: {len(waited)} waits for "
                           f"{len(planned)} {kind}s")
            record = metrics["step_times"][n - 1]["ranks"][rank]
            in_step = [c for c in calls if step.holds(c, chrome_trace.NS)]
            spans = sum(c.dur for c in in_step) / 1e6
            moved = sum(s.dur for s in background if step.holds(s, chrome_trace.NS)) / 1e6
            waited = sum(w.dur for w in waits if step.holds(w, chrome_trace.NS)) / 1e6
            tolerance = 1e-8 * (len(in_step) + 2 * microbatches * per_call + 1)
            expect(abs(record["communication_seconds"] - spans - moved) <= tolerance,
                   f"rank {rank} step {n}: communication {record['communication_seconds']} s, "
                   f"its collective spans {spans} s and background spans {moved} s")
            expect(abs(record["exposed_communication_seconds"] - spans - waited) <= tolerance,
                   f"rank {rank} step {n}: exposed {record['exposed_communication_seconds']} s, "
                   f"its collective spans {spans} s and waits {waited} s")
