"""tokenreel: record serving configurations one arm at a time, replay them as video."""

__version__ = "0.1.0"
