"""The extractor function (see app.py)."""
