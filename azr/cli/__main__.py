"""`python -m azr.cli ...` runs the `azr` command, as launchers that start a module expect
(`accelerate launch -m azr.cli train ...`, `torchrun -m azr.cli train ...`)."""

from azr.cli import main

if __name__ == "__main__":
    main()
