"""The scheduler function (see app.py)."""
