"""Discovery: what to harvest and whether it changed.

robots.txt (:mod:`.robots`), sitemaps, sitemap indexes and Signmaps (:mod:`.sitemap`),
``<lastmod>`` dates (:mod:`.lastmod`) and the checks that let a harvest skip what has not
changed (:mod:`.incremental`). Used by the sitemap expander.
"""
