"""The url resolver function (see app.py)."""
