"""The one exception type for problems with the user's input."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (file, config key or value, checkpoint), not a bug: the
    command line shows it as one line and exits with 2 (`nmt.cli`)."""

    log_to_run = True  # also end the run's log file with it (False when the run is another process's)
