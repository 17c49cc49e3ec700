"""Juggler: many continuous queries over event streams, evaluated together."""

__version__ = "0.1.0"
