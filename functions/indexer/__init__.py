"""The indexer function (see app.py)."""
