"""Command line: the `azr` group and the azr-train / azr-eval / azr-gen entry points (console scripts).

One module per command group; importing this package registers every command on the group.
"""

import sys

from azr.cli import (  # noqa: F401  (each registers its commands)
    absolute_zero,
    config,
    data,
    evaluate,
    export,
    gen,
    models,
    report,
    sandbox,
    tool,
    train,
)
from azr.cli.app import azr, invoke
from azr.cli.evaluate import eval_
from azr.cli.gen import gen as gen_command
from azr.cli.train import train as train_command

__all__ = ["azr", "eval_main", "gen_main", "invoke", "main", "train_main"]


def main() -> None:
    sys.exit(invoke(azr, "azr"))


def train_main() -> None:
    sys.exit(invoke(train_command, "azr-train"))


def eval_main() -> None:
    sys.exit(invoke(eval_, "azr-eval"))


def gen_main() -> None:
    sys.exit(invoke(gen_command, "azr-gen"))
