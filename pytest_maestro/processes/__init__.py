"""Running commands: one process group with a timeout, its output streams kept apart and logged,
and whatever it leaves running ended, now or by the next run."""
