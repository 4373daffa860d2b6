"""The user's config file: typed settings, its generated doc, edits and the starter file."""
