"""One module per ``attnlab`` subcommand; each only parses arguments and calls the library."""
