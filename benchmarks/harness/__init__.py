"""What every benchmark shares.

    data       the shared data folders: rows, texts, labelled splits, the splits a preset sees
    timing     paired rounds (every system once per round, in turn) and their medians and ratios
    results    bench_results/NAME-<time>.json (+ .md): the one writer, and the machine's state
    cpu        CPU time of this process and of a process tree, peak memory, from /proc
    baselines  the library's TF-IDF baselines (tfm_cls.classify.baseline) as benchmark rows
    models     what is timed: a run's ONNX export, a random-weight student, a small trained run
    options    the options several benchmarks share (make bench-infer hands one ARGS to three)
    samples    K-per-class samples of a data folder (seeded), and any folder read as labelled splits
"""
