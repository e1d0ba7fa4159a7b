# parameter parser sources
