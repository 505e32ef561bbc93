"""ark-trainer: RFT+GRPO post-training for OpenClaw agents."""

__version__ = "0.1.0"
