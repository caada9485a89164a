"""python -m perfmodel: the same as the `perfmodel` console script."""
from perfmodel.cli import run

run()
