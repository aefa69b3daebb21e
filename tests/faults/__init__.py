"""Fault injection: writes that fail, handlers that die half-way and messages delivered twice still
leave every URL with exactly one outcome and every run settled."""
