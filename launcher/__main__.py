"""`python -m launcher`: see launcher/cli/."""
import errno
import os
import sys

from .cli import main


def run() -> int:
    try:
        return main()
    except BrokenPipeError:  # e.g. `python -m launcher logs NAME | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # the output could not be written (a full disk, /dev/full): one line
        if error.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT):
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is buffered cannot go out either
        print(f"error: cannot write the output: {error.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run())
