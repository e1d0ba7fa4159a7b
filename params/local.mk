# params: example parameter files, installed under $(pkgdatadir)
dist_pkgdata_DATA += params/plummer.txt params/galaxy.txt
