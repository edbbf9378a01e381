"""`tokenreel import`: a peer tool's result file (vllm bench serve, AIPerf) as a session arm.

Each importer reads its tool's file into `PeerRequest`s; `build` turns them into runs, marked
imported, with what the file lacks said plainly (`Imported.lacks`); nothing it lacks is invented.
"""
