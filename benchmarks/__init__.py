"""The benchmarks: one module per question, run from the repository root as
`python -m benchmarks.<module> --help`; `python -m benchmarks` (`make bench`) lists them.

    harness/   the shared pieces: reading data, paired rounds and medians, the results writer,
               CPU accounting, the classical baselines (tfm_cls.classify.baseline), small models
    peers/     other systems measured beside ours (fastText, model2vec, a FastAPI server); their
               packages come with the `bench` extra and are imported only when used

A benchmark module imports the harness, the peers and the library, never another benchmark
module (tests/unit/benchmarks/test_package.py). Results go to bench_results/NAME-<time>.json
(+ .md where there is a table), written by harness.results.
"""
