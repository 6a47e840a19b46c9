"""Planning: a launch or resume request becomes one typed plan, checked before anything runs.

Kept free of imports (`rpc/wire/` imports `planning.request` and
`planning.views`, which import nothing of ours, and must not pull in the rest).
"""
