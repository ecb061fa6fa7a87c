"""A stand-in for aiter (tests/python/standins/README.md)."""
