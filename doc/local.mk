# doc
dist_doc_DATA += doc/parameters.md
dist_doc_DATA += doc/performance.md
