"""The benchmarks, each a script run as `python bench/NAME.py` (README, Performance);
`common.py` and `runs.py` hold what several of them share."""
