"""The renderer function (see app.py; its own stack: template.yaml beside it)."""
