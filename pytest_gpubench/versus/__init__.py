"""A run against a git revision (``--gpubench-against``, ``gpubench bisect``): checkouts of a
revision, both revisions in one process in lockstep, pairs of fresh processes, their verdicts,
and the bisection of a range of commits."""
