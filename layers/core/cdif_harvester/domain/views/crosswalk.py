"""The crosswalk: every view the harvester publishes of a valid CDIF record, in one place.

Each view lives in its own pure module and is re-exported here: PID Kernel (CDIF
discoverability, Appendix 2; :mod:`~cdif_harvester.domain.views.pidkernel`), Signposting
(Appendix 3, RFC 8288, RFC 9264; :mod:`~cdif_harvester.domain.views.signposting`), N-Quads
(:mod:`~cdif_harvester.domain.views.nquads`) and a source's Signmap
(:mod:`~cdif_harvester.domain.views.signmap`). The input is a record in the CDIF 1.0 shape, read
with :mod:`cdif_harvester.domain.records.record_values`; the views are written by
:mod:`cdif_harvester.stages.crosswalk`.

See docs/decisions/0035-crosswalk-views.md.
"""

from __future__ import annotations

from cdif_harvester.domain.views.nquads import NQUADS_MEDIA_TYPE, NQuadsError, record_nquads
from cdif_harvester.domain.views.pidkernel import KERNEL_ATTRIBUTES, pid_kernel_view
from cdif_harvester.domain.views.signmap import (
    SIGNMAP_MEDIA_TYPE,
    SignmapPart,
    iter_signmap,
    latest_lastmod,
    render_signmap,
    render_signmap_index,
    signmap_links,
)
from cdif_harvester.domain.views.signposting import (
    REPUBLISHED_RELATIONS,
    SIGNPOSTING_RELATIONS,
    html_link_elements,
    landing_page,
    link_header,
    linkset_json,
    linkset_text,
    record_links,
    signposting_links,
)

__all__ = [
    "KERNEL_ATTRIBUTES",
    "NQUADS_MEDIA_TYPE",
    "NQuadsError",
    "REPUBLISHED_RELATIONS",
    "SIGNMAP_MEDIA_TYPE",
    "SIGNPOSTING_RELATIONS",
    "SignmapPart",
    "html_link_elements",
    "landing_page",
    "latest_lastmod",
    "link_header",
    "linkset_json",
    "linkset_text",
    "pid_kernel_view",
    "record_links",
    "record_nquads",
    "iter_signmap",
    "render_signmap",
    "render_signmap_index",
    "signmap_links",
    "signposting_links",
]
