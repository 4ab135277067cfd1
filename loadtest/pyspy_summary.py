"""Summarise py-spy raw profiles: where the broker's processes spend their time.

    py-spy record -p WORKER_PID -d 20 -f raw -o worker0.txt --nonblocking
    .venv/bin/python -m loadtest.pyspy_summary worker0.txt worker1.txt [--top 25]

py-spy's ``raw`` format is one collapsed stack per line ("frame;frame;frame count"), the
input of flamegraph.pl. This prints, over all the files given, the share of samples in
which each function is on the stack (inclusive) and at the top of it (self), so a
flame graph can be summarised in a table. py-spy samples only threads that are running,
so the shares are of the busy time; native code (uvloop, kio, the kernel under a
syscall) shows as the Python frame that called it.
"""

from __future__ import annotations

import argparse
import collections
import sys


def summarise(paths: list[str]) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for path in paths:
        with open(path) as handle:
            for line in handle:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if not stack or not count.isdigit():
                    continue
                n = int(count)
                total += n
                frames = stack.split(";")
                own[frames[-1]] += n
                for frame in set(frames):
                    inclusive[frame] += n
    return total, inclusive, own


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", help="py-spy record -f raw outputs")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    total, inclusive, own = summarise(args.profiles)
    if not total:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} samples\n\n| inclusive | function |\n|---:|---|")
    for frame, n in inclusive.most_common(args.top):
        print(f"| {n / total:.1%} | `{frame}` |")
    print("\n| self | function |\n|---:|---|")
    for frame, n in own.most_common(args.top):
        print(f"| {n / total:.1%} | `{frame}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
