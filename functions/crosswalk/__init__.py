"""The crosswalk function (see app.py)."""
