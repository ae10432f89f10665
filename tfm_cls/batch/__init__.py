"""`tfm-cls batch`: batch inference of an exported model on Ray Data (docs/batch-inference.md).

    inputs.py    the input files (a file, a folder, a glob; Parquet / JSONL / CSV) read as records
    outputs.py   the output folder: atomic parts, the exactly-once check, the manifest
    cluster.py   connecting to Ray (a local cluster kept local), failures in one line
    pipeline.py  BatchJob and the pipeline (read -> OnnxClassifier actors -> parts); its flags: tfm_cls/cli/batch.py
"""
