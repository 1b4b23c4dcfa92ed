"""argparse types shared by the command line (``conformance check``) and the plugin's options: one
wording for the same mistake, whichever way a number is given."""

from __future__ import annotations

import argparse
import math

# Hypothesis examples per generated item, at most: a generated item's timeout grows with its examples
# (conformance.run.generated_plugin), and past about 1e9 s no timer of the platform can hold it
MAX_EXAMPLES = 1_000_000
DEFAULT_TIMEOUT = 60.0  # seconds an item may run (--conformance-timeout); a replay names the run's when not this
MAX_SECONDS = 7 * 24 * 3600  # a week: beyond it the timers (setitimer, faulthandler's watchdog, poll) overflow


def whole_number(text: str, maximum: int | None = None) -> int:
    """An argparse type: a whole number >= 0 (and <= ``maximum``)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"expected a whole number <= {maximum:,}, got {text!r}")
    return value


def examples_count(text: str) -> int:
    """An argparse type: a number of Hypothesis examples per generated item (0 to :data:`MAX_EXAMPLES`)."""
    return whole_number(text, MAX_EXAMPLES)


def seconds(minimum_exclusive: bool):
    """An argparse type: a finite number of seconds, > 0 or >= 0, at most :data:`MAX_SECONDS` (a week)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (minimum_exclusive and value == 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a finite number of seconds {'> 0' if minimum_exclusive else '>= 0'}")
        if value > MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at most {MAX_SECONDS} seconds (a week)")
        return value

    return parse
