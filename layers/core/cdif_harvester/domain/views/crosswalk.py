"""The crosswalk: every view the harvester publishes of a valid CDIF record, in one place.

Each view lives in its own pure module and is re-exported here:

* PID Kernel (CDIF discoverability, Appendix 2): :func:`pid_kernel_view`, in
  :mod:`cdif_harvester.domain.views.pidkernel`.
* Signposting (Appendix 3): :func:`record_links`, :func:`signposting_links`,
  :func:`landing_page` and the serialisers :func:`link_header` (RFC 8288),
  :func:`linkset_text` and :func:`linkset_json` (RFC 9264) and :func:`html_link_elements`, in
  :mod:`cdif_harvester.domain.views.signposting`.
* N-Quads: :func:`record_nquads`, in :mod:`cdif_harvester.domain.views.nquads`.
* Signmap of a source (signposting.org Signmaps): :func:`render_signmap` and
  :func:`render_signmap_index`, in :mod:`cdif_harvester.domain.views.signmap`.

The input is a record in the CDIF 1.0 shape (resource at the root, metadata record under
``schema:subjectOf``), as the normaliser writes it; values are read with
:mod:`cdif_harvester.domain.records.record_values`. The stage that writes the views is
:mod:`cdif_harvester.stages.crosswalk`.
"""

from __future__ import annotations

from cdif_harvester.domain.views.nquads import NQUADS_MEDIA_TYPE, NQuadsError, record_nquads
from cdif_harvester.domain.views.pidkernel import KERNEL_ATTRIBUTES, pid_kernel_view
from cdif_harvester.domain.views.signmap import (
    SIGNMAP_MEDIA_TYPE,
    SignmapPart,
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
    "render_signmap",
    "render_signmap_index",
    "signmap_links",
    "signposting_links",
]
