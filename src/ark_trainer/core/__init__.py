"""The core floor: configuration, run folders, models, runtime, metrics and statistics, generation and export."""
