"""The intake function (see app.py)."""
