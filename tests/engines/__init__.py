"""Real inference engines for the `engine` tests: a pinned llama.cpp build, tiny models, servers."""
