"""The command line's subcommands and the formats they read and write."""
