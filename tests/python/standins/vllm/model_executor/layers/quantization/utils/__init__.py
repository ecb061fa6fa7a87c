"""A stand-in (tests/python/standins/README.md)."""
