"""Records: from a fetched document to a validated CDIF record.

JSON-LD extraction and repair (:mod:`.extraction`), the shipped JSON-LD contexts
(:mod:`.jsonld_loader`), the contexts one harvester serves, trusted ones included
(:mod:`.contexts`), and the fast expansion path (:mod:`.jsonld_fast`), normalisation to the
CDIF shape (:mod:`.normalisation`), values read from a record (:mod:`.record_values`), JSON
Schema validation (:mod:`.validation`) and SHACL (:mod:`.shacl`). Used by the extractor.
"""
