# doc
# doc/formats.md is listed by src/io.mk (the I/O fragment owns it).
dist_doc_DATA += doc/install.md doc/running.md
dist_doc_DATA += doc/parameters.md
dist_doc_DATA += doc/output.md
dist_doc_DATA += doc/algorithm.md
dist_doc_DATA += doc/performance.md
dist_doc_DATA += doc/sweeps.md
dist_doc_DATA += doc/testing.md
dist_doc_DATA += doc/developing.md
docfiguresdir = $(docdir)/figures
dist_docfigures_DATA = doc/figures/sweep-65536.png doc/figures/time-vs-n-h100.png

# The man page, written by hand (tests/man_page.sh checks it).
dist_man_MANS = doc/hytree.1
