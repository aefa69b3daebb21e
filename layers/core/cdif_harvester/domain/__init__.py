"""The pure core, grouped by the pipeline stage each part serves.

``discovery`` (robots.txt, sitemaps, lastmod, change checks) -> ``resolution`` (typed links and
where the metadata is) -> ``records`` (JSON-LD extraction, normalisation, validation) -> ``views``
(PID Kernel, Signposting, N-Quads, Signmap). No I/O, no boto3, no ``os.environ``.
"""
