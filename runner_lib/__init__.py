"""Shared plumbing of the runners: flags, errors, strategy, feature layout.

Runners import this package; it imports modeling/ and tokenization/, never
the reverse.
"""
