"""`python -m launcher`: see launcher/cli/."""
import os
import sys

from .cli import main


def run() -> int:
    try:
        return main()
    except BrokenPipeError:  # e.g. `python -m launcher logs NAME | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(run())
