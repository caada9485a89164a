import os

from hypothesis import HealthCheck, settings

# ci: the same examples every run (a red CI is a real failure, not a draw); dev: fresh draws to explore
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
