"""ghostrunner: a cron-oriented scheduler that runs reflective routines for agents and writes what they say to their journals."""
