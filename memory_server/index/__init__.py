"""Index primitives the graph carries write by write: the substring haystack and word index
(`search`), and the stemmed term index with its BM25 ranking (`ranking`). Pure code."""
