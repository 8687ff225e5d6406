"""The verdict, and the statistics behind it: the noise-aware rule (rule.py) and the one
place that decides what a verdict does (gate.py). With core.samples (the precision of a
session's median, which stops the timing engine's sampling), the only code that imports
scipy."""
