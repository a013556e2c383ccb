"""``python -m costgraph ...``: the ``costgraph`` command (:func:`costgraph.cli.run`)."""

from .cli import run

if __name__ == "__main__":
    run()
