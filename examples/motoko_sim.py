"""Simulate four weeks of motoko's life from Python, then print the digest and a prompt context.

Run:  python examples/motoko_sim.py [JOURNAL_DIR]
"""

import json
import sys
from datetime import datetime, timedelta

from journal import Journal
from runner.config import load_config
from runner.logs import configure_logging
from runner.simulate import simulate

configure_logging(level="warning")  # run events at info would fill the terminal
root = sys.argv[1] if len(sys.argv) > 1 else "./ghostjournal-data"
config = load_config().with_journal_root(root)  # embedded defaults: motoko on the offline simulated backend

start = datetime(2026, 8, 1, tzinfo=config.timezone)
summary = simulate(config, ["motoko"], start, start + timedelta(days=28))[0]
print(json.dumps(summary.to_dict()))

with Journal(root) as journal:
    digest = journal.digest(agent="motoko", since=start, until=start + timedelta(days=28))
    print(json.dumps({"themes": digest.themes[:5], "continuity": {"links": digest.continuity["links"]}}, indent=2))
    print(journal.prompt_context("what keeps returning?", k=4, agent="motoko"))
