"""A bench's CPU count of a process tree leaves out the trees it is told to: a bench that starts its stack itself has
the stack's services (Kafka's brokers) among its descendants."""

import os
import subprocess
import sys
import time

from bench.process_memory import tree

# A child that starts a grandchild and waits for it: a service and the process it runs.
_PARENT = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'])"


def test_an_excluded_process_and_its_descendants_are_left_out():
    child = subprocess.Popen([sys.executable, "-c", _PARENT])
    try:
        deadline = time.monotonic() + 20
        while len(tree(child.pid)) < 2:  # the grandchild started
            assert time.monotonic() < deadline, "the grandchild did not start"
            time.sleep(0.05)
        grandchild = [pid for pid in tree(child.pid) if pid != child.pid]
        assert {child.pid, *grandchild} <= set(tree(os.getpid()))
        left = set(tree(os.getpid(), excluded=frozenset({child.pid})))
        assert os.getpid() in left and not left & {child.pid, *grandchild}
    finally:
        for pid in tree(child.pid):
            os.kill(pid, 9)
        child.wait()
