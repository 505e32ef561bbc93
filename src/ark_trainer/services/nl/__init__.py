"""Natural-language requests → a validated TrainConfig (``ark-trainer plan`` / ``run``)."""
