"""Plain values every layer shares: settings, records, launches, errors.

Nothing here imports pytest, torch or matplotlib; numpy is imported by the functions that
summarize samples, and scipy.special by the median's precision (samples.py), when they run.
"""
