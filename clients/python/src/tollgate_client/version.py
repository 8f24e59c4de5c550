"""The client's version (sent in its User-Agent)."""

__version__ = "0.1.0"
