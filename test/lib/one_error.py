"""Run a command that must refuse its input the way cleave refuses: exit
code EXIT (not a signal), nothing on stdout, exactly one line on stderr that
is not a `note:` line and at most one note. Prints that stderr on stdout for
FileCheck; exits 1 (saying why) when any of it does not hold.

Usage: one_error.py EXIT CMD [ARGS...]
"""
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        raise SystemExit("usage: one_error.py EXIT CMD [ARGS...]")
    want = int(sys.argv[1])
    run = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=600)
    lines = run.stderr.splitlines()
    notes = [line for line in lines if line.startswith("note: ")]
    problems = []
    if run.returncode != want:
        problems.append(f"exit code {run.returncode}, expected {want}")
    if run.stdout:
        problems.append(f"{len(run.stdout)} bytes on stdout")
    if len(lines) - len(notes) != 1:
        problems.append(f"{len(lines) - len(notes)} error lines on stderr, expected 1")
    if len(notes) > 1:
        problems.append(f"{len(notes)} note lines")
    if problems:
        sys.stderr.write(run.stderr)
        raise SystemExit("one_error.py: " + "; ".join(problems))
    sys.stdout.write(run.stderr)


if __name__ == "__main__":
    main()
