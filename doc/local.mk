# doc
dist_doc_DATA += doc/parameters.md
