"""``python -m quantgym``: the ``quantgym`` command line."""

from quantgym.cli import app

if __name__ == "__main__":
    app(prog_name="quantgym")
