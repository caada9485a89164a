"""python -m perfmodel.cli"""
from perfmodel.cli import run

run()
