"""``python -m runner`` is ``ghostrunner`` (the scheduler starts its workers this way)."""

from runner.cli.cli import main

if __name__ == "__main__":
    main()
