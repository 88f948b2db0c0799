"""The demo from Python: motoko lives the demo's four weeks, then the digest of the last one and a prompt context are printed.

It is `ghostrunner demo`'s twin: the same embedded defaults, the same first day
(2026-08-03) and length, the same journal (motoko in the user's state
directory), the same calls. Run either first: the other appends nothing.
Give a directory to keep the journal there instead.

Run:  python examples/motoko_sim.py [JOURNAL_DIR]
"""

import sys

from runner.monitor.logs import configure_logging
from runner.run.demo import DEMO_DAYS, DEMO_START, run_demo
from runner.run.simulate import simulation_window
from runner.settings.config import load_config

configure_logging(level="warning")  # run events at info would fill the terminal
config = load_config()  # embedded defaults: motoko on the offline simulated backend, in this system's local zone
if len(sys.argv) > 1:
    config = config.with_journal_root(sys.argv[1])
start, _ = simulation_window(DEMO_DAYS, config.timezone, DEMO_START)  # the demo's defaults for --days and --start
print(run_demo(config, "motoko", start, DEMO_DAYS).render())
