"""The command-line layer: parses options, calls the library, maps errors to exit codes."""
