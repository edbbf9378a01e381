"""The version of tokenreel, written into sessions and render manifests: the installed distribution's."""

from importlib.metadata import version

__version__ = version("tokenreel")
