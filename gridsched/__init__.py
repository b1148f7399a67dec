"""gridsched: a batch scheduler for one machine."""

__version__ = "0.1.0"
