"""Data: JSONL loading and validation, splits, statistics."""
