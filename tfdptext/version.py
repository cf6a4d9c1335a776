"""The package version, kept in one place for setup.py and metrics files."""

__version__ = "0.1.0"
