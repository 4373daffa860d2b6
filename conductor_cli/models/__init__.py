"""Model files: the catalog (data), GGUF headers, and downloading into the models dir."""
