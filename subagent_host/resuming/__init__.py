"""Planning a resume: which child of which stored run, checked against what it was launched as.

Above the store and the runs (it reads both), below the handlers.
"""
