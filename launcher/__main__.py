"""`python -m launcher` and the `tfjob` script: see launcher/cli/. They end as the trainer's
commands do (`trainer.outputs.command`, TensorFlow-free): a reader of stdout that has left
(`logs NAME | head`) ends the command quietly, exit 0; a stdout that cannot be written (a full
disk, /dev/full) is one line, exit 1."""
import sys

from trainer.outputs import command

from .cli import main

run = command("error")(main)

if __name__ == "__main__":
    sys.exit(run())
