"""The sitemap expander function (see app.py)."""
