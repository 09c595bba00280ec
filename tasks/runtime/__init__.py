"""What the stages share at run time: the stage runner, MLflow tracking, validation, episodes, trainer configs,
journals, fingerprints."""
