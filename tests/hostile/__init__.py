"""The standing hostile-input suite: every kind of bad publisher input ends in one recorded outcome,
quickly and in bounded memory (see tests/support/bounds.py)."""
