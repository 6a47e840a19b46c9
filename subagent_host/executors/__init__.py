"""Executors: *where* a child runs, apart from *what* it is (backends/).

An adapter renders a child's launch (argv, env, cwd, stdin) the same way
wherever it runs; an executor starts that launch and hands back the child's
handle (base.py `ChildHandle`), which tells when it exits and ends its whole
tree on request. `local.py` is this machine (the supervisor,
backends/supervisor.py); a cluster executor places the child on another node
and keeps the same guarantees there (protocol.md §8.8). `select.py` chooses one
from the configuration. Ray, an optional extra, is imported only by the cluster
executor's own modules, never by this package's others (an import contract).
"""
