"""Simulated vLLM-like endpoints: a stand-in engine for the demo and the tests, not part of recording."""
