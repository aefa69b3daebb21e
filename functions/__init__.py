"""Lambda handlers, one folder per stage (each folder is a function CodeUri in template.yaml)."""
