"""CDIF harvester: finds, resolves, normalises, validates and publishes CDIF dataset metadata.

The package is the shared library of every stage. It is installed from the repository root
(``pip install -e .``) for tests and the local runner, and built by SAM into the Lambda layer, so
tests import exactly what Lambda imports.
"""

__version__ = "0.1.0"
PRODUCT = "cdif-harvester"
CONTACT_URL = "https://github.com/cdif-harvester/cdif-harvester"
USER_AGENT = f"{PRODUCT}/{__version__} (+{CONTACT_URL})"

__all__ = ["CONTACT_URL", "PRODUCT", "USER_AGENT", "__version__"]
