#!/usr/bin/env python3
"""Runs a command while the machine is busy: one spinning process per CPU
plus one, stopped when the command ends. Exits with the command's status.

usage: with_busy_cpus.py -- COMMAND...
"""
import multiprocessing
import os
import subprocess
import sys
import time


def spin():
    while True:
        pass


def main():
    command = sys.argv[sys.argv.index("--") + 1:]
    spinners = [multiprocessing.Process(target=spin, daemon=True)
                for _ in range(os.cpu_count() + 1)]
    for s in spinners:
        s.start()
    time.sleep(0.3)  # running before the command starts probing
    try:
        return subprocess.run(command).returncode
    finally:
        for s in spinners:
            s.terminate()


if __name__ == "__main__":
    sys.exit(main())
