"""`python -m s3skills.skills.index.parse_worker`: the process heavy `SKILL.md` heads are parsed in.

Started by `s3skills.skills.index.isolated.ParseWorker` with the parent's interpreter; reads
requests (pickled, length-framed) on stdin and answers on stdout until stdin closes. Anything
else printed goes to stderr, so the answers stay whole.
"""

from __future__ import annotations

import sys

from s3skills.skills.index.heads import parse_heads
from s3skills.skills.index.isolated import serve

__all__ = ["main"]


def main() -> None:
    """Serve the parent until it closes the pipe."""
    answers = sys.stdout.buffer
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, answers, parse_heads)


if __name__ == "__main__":
    main()
