"""Where items come from: scanning roots, keys, globs."""
