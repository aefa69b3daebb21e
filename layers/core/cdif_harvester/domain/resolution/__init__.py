"""Resolution: from a URL to where its metadata is.

Typed links from HTTP ``Link`` headers, HTML and linksets (:mod:`.weblinks`), the HTML
``<link>``/``<meta>`` reader (:mod:`.htmlmeta`) and the resolver's decisions: profiles, link
ranking, anchors, claims and verdicts (:mod:`.rules`). Used by the URL resolver.
"""
