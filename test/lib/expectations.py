"""What tests that collect their problems share: the list each failed
expectation adds to, failing at the end with them (finish), and running a
command that must succeed."""
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


def finish():
    """Fails the test with the problems found (the first 40), if any."""
    if problems:
        sys.exit("\n".join(problems[:40]))
