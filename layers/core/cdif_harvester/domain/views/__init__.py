"""Views: what is published for each record.

The PID Kernel view (:mod:`.pidkernel`), the Signposting views (:mod:`.signposting`), N-Quads
(:mod:`.nquads`), a source's Signmap (:mod:`.signmap`) and the facade that builds them all
(:mod:`.crosswalk`). Used by the crosswalk stage.
"""
