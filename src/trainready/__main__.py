import sys

from trainready.errors import missing_dependency

try:
    from trainready.cli import main
except ModuleNotFoundError as exc:  # a checkout run with PYTHONPATH=src on a host without the dependencies
    line = missing_dependency(exc)
    if line is None:
        raise
    sys.stderr.write(line + "\n")
    sys.exit(2)

if __name__ == "__main__":
    main()
