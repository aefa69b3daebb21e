"""``python -m cdif_harvester.api``: print the intake API's OpenAPI document."""

from cdif_harvester.api import main

main()
