"""The benches' CPU reading (bench.process_memory.TreeCpu), on real processes: CPU used by a process that leaves the
tree before the reading (its parent killed, so init adopts it) still counts."""

import os
import subprocess
import sys
import time

from bench.process_memory import TreeCpu

# The middle process forks a grandchild that burns CPU for half a second, says so, and then waits to be told to exit.
_MIDDLE = """
import os, sys, time
if os.fork() == 0:
    started = time.process_time()
    while time.process_time() - started < 0.5:
        pass
    print("burnt", flush=True)
    sys.stdin.readline()
    os._exit(0)
time.sleep(60)
"""


def test_the_cpu_of_a_process_that_left_the_tree_still_counts():
    with TreeCpu(os.getpid(), interval_s=0.05) as cpu:
        middle = subprocess.Popen([sys.executable, "-c", _MIDDLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert middle.stdout.readline() == b"burnt\n"
            time.sleep(0.2)  # a few samples with the grandchild in the tree
            middle.kill()  # the grandchild, orphaned, leaves this process's tree
            middle.wait()
            time.sleep(0.2)
            used = cpu.seconds()
        finally:
            middle.stdin.close()  # the grandchild reads end of file and exits
    assert 0.45 <= used < 5
