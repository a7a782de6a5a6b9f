"""Hypothesis profiles for the property tests (imported by them; no conftest change needed).

- ``ci`` (the default, and always under ``CI=true``): no deadline (2 shared cores), a bounded
  number of examples, derandomized so a CI run is reproducible and a failure replays.
- ``fuzz`` (``HYPOTHESIS_PROFILE=fuzz``, ``make fuzz``): many examples, random seeds, the
  example database on (under the temp directory, like hypothesis's other caches), for long
  runs on a developer machine.
- ``dev``: ``HYPOTHESIS_PROFILE=dev`` – random seeds at the CI budget.

Tests scale their own ``max_examples`` with :func:`examples`, so a heavy test (ten chained
compactions) runs fewer examples than a light one under every profile.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis keeps caches (and the fuzz profile's example database) in a `.hypothesis`
# directory, by default in the working tree: tests write only under the temp directory.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "context-compactor-hypothesis")

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=50,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=500,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)

#: ``HYPOTHESIS_PROFILE`` when set (so a CI job may fuzz on purpose), else ``ci``.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
settings.load_profile(PROFILE)

#: The profile's example budget; 50 under ``ci``.
BASE_EXAMPLES: int = settings().max_examples


def examples(share: float) -> int:
    """``share`` × the profile's budget (at least 1): light tests above 1, heavy ones below."""
    return max(1, round(BASE_EXAMPLES * share))
