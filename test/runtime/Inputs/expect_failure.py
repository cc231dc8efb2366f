"""Runs a command that must fail: with exit status --status, within --within
seconds (it is killed after that). Its output passes through.

    expect_failure.py --status 3 --within 30 -- mpirun -n 2 PROGRAM ARGS...
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, required=True)
    parser.add_argument("--within", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    # A session of its own, so that a timeout kills mpirun and every rank.
    process = subprocess.Popen(command, start_new_session=True)
    try:
        status = process.wait(timeout=args.within)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        sys.exit(f"expect_failure: still running after {args.within} s: {' '.join(command)}")
    seconds = time.monotonic() - start
    sys.stdout.flush()
    if status != args.status:
        sys.exit(f"expect_failure: exit status {status}, expected {args.status}")
    print(f"expect_failure: exit status {status} after {seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
