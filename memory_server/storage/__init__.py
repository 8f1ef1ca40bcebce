"""Where the memory lives: the file and its atomic saves, the lock between processes, the cache
beside a large file, and the store that commits writes and serves reads."""
