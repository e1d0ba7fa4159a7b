# parameter parser tests
