"""Outputs: files written whole or not at all, and one run per output
folder."""
