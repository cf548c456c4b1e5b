"""The exception types a command line turns into one line on stderr (`nmt.system.cli`)."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (file, config key or value, checkpoint), not a bug: the
    command line shows it as one line and exits with 2 (`nmt.system.cli`)."""

    log_to_run = True  # also end the run's log file with it (False when the run is another process's)
    exit_code = 2


class Interrupted(UserError):
    """The user stopped the command (Ctrl-C, SIGINT): one line that says what was kept and how to
    go on, and exit code 130 (128 + SIGINT), as a shell reports an interrupted program."""

    exit_code = 130
