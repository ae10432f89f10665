"""Classification on the engine: the task, the heads per task type, metrics, plots, calibration,
the end of a run (finish), prediction, the model card, the classical baseline and the wide branch."""
