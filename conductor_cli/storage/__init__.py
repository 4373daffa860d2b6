"""What a run leaves on disk: paths, the response cache, traces."""
