"""Documents → chunks that fit the embedder's window: prose by sections (`prose`), code by syntax tree (`code`)."""
