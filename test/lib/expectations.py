"""What the trace tests share: the list of problems each failed expectation
adds to (the test prints them and fails at the end), and running a command
that must succeed."""
import subprocess
import sys

problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)
    return condition


def run(args):
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result
